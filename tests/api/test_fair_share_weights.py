"""An API key's weight (fair share between tenants): stored, listed, refused when not positive, and
recorded for its tenant when one of its jobs is staged, so that REFILL gives it that many turns."""

from __future__ import annotations

import json

import httpx
import pytest
import redis

from broker.keys import RedisKeys
from cli.main import EXIT_BAD_INPUT, EXIT_OK, main
from contract.settings import Settings
from storage import ApiKeyStore
from tests.api.conftest import bearer

JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr", "lane": "bulk"}


def test_api_key_create_takes_a_weight_that_list_shows(
    capsys: pytest.CaptureFixture[str], settings_env: Settings
) -> None:
    assert main(["api-key", "create", f"heavy-{settings_env.key_prefix}", "--weight", "3", "--json"]) == EXIT_OK
    key_id = json.loads(capsys.readouterr().out)["id"]
    assert main(["api-key", "list", "--json"]) == EXIT_OK
    [listed] = [k for k in json.loads(capsys.readouterr().out) if k["id"] == key_id]
    assert listed["weight"] == 3
    assert main(["api-key", "list"]) == EXIT_OK
    assert "weight" in capsys.readouterr().out
    assert main(["api-key", "create", "zero", "--weight", "0"]) == EXIT_BAD_INPUT
    assert "weight must be a positive" in capsys.readouterr().err


async def test_a_keys_weight_is_recorded_for_its_tenant_when_its_job_is_staged(
    settings: Settings, key_store: ApiKeyStore, http: httpx.AsyncClient, raw_redis: redis.Redis
) -> None:
    keys = RedisKeys.from_settings(settings)
    _, heavy = await key_store.create(f"heavy-{settings.key_prefix}", tenant="heavy", weight=3)
    _, light = await key_store.create(f"light-{settings.key_prefix}", tenant="light")
    lane = keys.bulk_jobs_stream
    for _ in range(settings.fair_share_buffer):  # the lane full of unread jobs: tenants' jobs are staged
        raw_redis.xadd(lane, {"v": "1", "id": "00000000-0000-4000-8000-000000000000", "payload": "{}"})
    for key in (heavy, light):
        assert (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).status_code == 202
    assert raw_redis.hgetall(keys.tenant_weights) == {"heavy": "3", "light": "1"}
    assert raw_redis.lrange(keys.rotation(lane), 0, -1) == ["heavy", "light"]
    assert raw_redis.xlen(keys.staging(lane, "heavy")) == 1
