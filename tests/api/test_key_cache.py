"""API keys are cached per server, yet a revoked key is refused by the next request."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from api.key_cache import UNKNOWN_CACHE_SECONDS, ApiKeyCache
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from cli.main import EXIT_OK, main
from contract.settings import Settings
from storage import ApiKey, ApiKeyStore
from tests.api.conftest import bearer


class CountingStore:
    """An ApiKeyStore stand-in that counts its lookups."""

    def __init__(self) -> None:
        self.lookups = 0
        self.key = ApiKey("id", "name", "tenant", "dgm_x", None, datetime.now(UTC), None)

    async def find(self, token: str) -> ApiKey | None:
        self.lookups += 1
        return self.key if token == "good" else None


async def test_a_known_key_and_an_unknown_one_are_each_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both are remembered: a valid key for CACHE_SECONDS, an unknown one for UNKNOWN_CACHE_SECONDS (then again)."""
    clock = [1_000.0]
    monkeypatch.setattr("api.key_cache.time.monotonic", lambda: clock[0])
    store = CountingStore()
    cache = ApiKeyCache(store)  # type: ignore[arg-type]
    assert [await cache.find("good") for _ in range(3)] == [store.key] * 3
    assert store.lookups == 1
    assert [await cache.find("bad") for _ in range(3)] == [None] * 3
    assert store.lookups == 2
    assert cache.known_unknown("bad") and not cache.known_unknown("good") and cache.cached("good") == store.key
    clock[0] += UNKNOWN_CACHE_SECONDS
    assert await cache.find("bad") is None
    assert store.lookups == 3
    cache.forget("good")
    assert cache.cached("good") is None
    await cache.find("good")
    assert store.lookups == 4


async def test_revoking_a_key_in_use_refuses_its_next_request(
    http: httpx.AsyncClient, settings_env: Settings, key_store: ApiKeyStore, capsys: pytest.CaptureFixture[str]
) -> None:
    record, key = await key_store.create(f"cached-{settings_env.key_prefix}")
    missing = "/v1/jobs/00000000-0000-0000-0000-000000000000"
    assert (await http.get(missing, headers=bearer(key))).json()["error"]["code"] == "job_not_found"  # now cached
    assert main(["api-key", "revoke", record.id]) == EXIT_OK
    refused = await http.get(missing, headers=bearer(key))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert "warning" not in capsys.readouterr().err


async def test_revoking_a_key_marks_it_on_a_redis_cluster(
    cluster_settings: Settings,
    key_store: ApiKeyStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``dragoman api-key revoke`` with ``DRAGOMAN_REDIS_URL=redis+cluster://...`` writes the marker (it opened
    a single-server client, which refuses that URL: the command failed after revoking, and no marker)."""
    assert cluster_settings.redis_url and cluster_settings.database_url
    for name, value in (
        ("DRAGOMAN_REDIS_URL", cluster_settings.redis_url),
        ("DRAGOMAN_DATABASE_URL", cluster_settings.database_url),
        ("DRAGOMAN_KEY_PREFIX", cluster_settings.key_prefix),
        ("DRAGOMAN_REDIS_SHARDS", str(cluster_settings.redis_shards)),
        ("DRAGOMAN_DATA_DIR", str(cluster_settings.data_dir)),
    ):
        monkeypatch.setenv(name, value)
    record, _ = await key_store.create(f"cluster-{cluster_settings.key_prefix}")
    assert main(["api-key", "revoke", record.id]) == EXIT_OK
    assert "warning" not in capsys.readouterr().err
    redis = open_redis(cluster_settings.redis_url)
    try:
        assert await redis.exists(RedisKeys.from_settings(cluster_settings).revoked_api_key(record.id)) == 1
    finally:
        await redis.aclose()
