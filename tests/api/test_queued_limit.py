"""The per-key limit on unfinished jobs: 429 with Retry-After past it, free again once jobs finish."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import redis
import redis.asyncio as aioredis

from broker.keys import RedisKeys
from contract.settings import Settings
from tenancy.queued_limit import QueuedJobLimit, TooManyQueuedJobsError
from tests.api.conftest import KeyMaker, bearer
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(120)
JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}
TWO_LINES = b'{"custom_id": "a", "text": "One."}\n{"custom_id": "b", "text": "Two."}\n'


def _refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    return str(response.json()["error"]["message"])


async def test_a_key_at_its_limit_waits_until_its_jobs_finish(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    start_worker: WorkerFactory,
    raw_redis: redis.Redis,
    settings: Settings,
) -> None:
    small, other = tenant_key("small", max_queued_jobs=3), tenant_key("other")
    assert (await http.post("/v1/jobs", json=[JOB] * 3, headers=bearer(small))).status_code == 202
    one_more = await http.post("/v1/jobs", json=JOB, headers=bearer(small))
    assert "3 unfinished jobs" in _refused(one_more, 429, "too_many_queued_jobs")
    assert one_more.headers["Retry-After"] == "10"
    run = await http.post("/v1/runs?source_lang=en&target_lang=fr", content=TWO_LINES, headers=bearer(small))
    _refused(run, 429, "too_many_queued_jobs")
    document = await http.post(
        "/v1/documents?source_lang=en&target_lang=fr&format=txt", content=b"Hello.", headers=bearer(small)
    )
    _refused(document, 429, "too_many_queued_jobs")
    empty = await http.post(  # a bad document is answered as bad first: retrying it later cannot help
        "/v1/documents?source_lang=en&target_lang=fr&format=txt", content=b"  \n", headers=bearer(small)
    )
    assert "empty" in _refused(empty, 422, "invalid_job")
    # Larger than the limit itself: retrying cannot help, so it is not a 429.
    too_big = await http.post("/v1/jobs", json=[JOB] * 4, headers=bearer(small))
    assert "over this key's limit of 3" in _refused(too_big, 422, "over_queued_job_limit")
    # Another tenant is not held back, and nothing refused was queued.
    assert (await http.post("/v1/jobs", json=JOB, headers=bearer(other))).status_code == 202
    assert raw_redis.xlen(RedisKeys.from_settings(settings).jobs_stream) == 4
    async with start_worker(DeterministicEngine()):
        retried = await http.post("/v1/jobs?wait=20", json=JOB, headers=bearer(small))
        for _ in range(100):  # the three earlier jobs finish first; then there is room
            if retried.status_code != 429:
                break
            await asyncio.sleep(0.05)
            retried = await http.post("/v1/jobs?wait=20", json=JOB, headers=bearer(small))
    assert retried.status_code == 200 and retried.json()["status"] == "succeeded", retried.text


async def test_a_batch_past_the_limit_fails_like_openai_past_its_enqueued_limit(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key = tenant_key("small", max_queued_jobs=1)
    line = {"custom_id": "x", "method": "POST", "url": "/v1/translations", "body": JOB}
    content = b"".join(json.dumps({**line, "custom_id": str(n)}).encode() + b"\n" for n in range(2))
    uploaded = await http.post(
        "/v1/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}, headers=bearer(key)
    )
    batch = await http.post(
        "/v1/batches",
        json={"input_file_id": uploaded.json()["id"], "endpoint": "/v1/translations", "completion_window": "24h"},
        headers=bearer(key),
    )
    assert batch.status_code == 200, batch.text
    assert batch.json()["status"] == "failed"
    assert [error["code"] for error in batch.json()["errors"]["data"]] == ["queued_job_limit_exceeded"]
    assert raw_redis.exists(RedisKeys.from_settings(settings).jobs_stream) == 0


async def test_members_older_than_the_state_records_are_dropped(service_urls: object, settings: Settings) -> None:
    """A job whose state record expired before it finished cannot be uncounted by FINISH: it ages out instead."""
    keys = RedisKeys.from_settings(settings)
    client = aioredis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        now = time.time()
        await client.zadd(keys.tenant_queued("t"), {"lost": now - 1_000, "live": now - 10})
        assert await QueuedJobLimit(client, keys, state_ttl_seconds=100).count("t", now=now) == 1
        assert await client.zrange(keys.tenant_queued("t"), 0, -1) == ["live"]
    finally:
        await client.aclose()


async def test_a_count_read_with_the_rate_limit_spares_a_round_trip_and_is_rechecked_before_refusing(
    service_urls: object, settings: Settings
) -> None:
    keys = RedisKeys.from_settings(settings)
    client = aioredis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    limit = QueuedJobLimit(client, keys, state_ttl_seconds=100)
    try:
        await client.zadd(keys.tenant_queued("t"), {"live": time.time()})
        await limit.admit("t", 1, 1, counted=0)  # room by the earlier count: no recount (a race may pass by one)
        await limit.admit("t", 2, 1, counted=5)  # the earlier count says full: recounted, and there is room
        with pytest.raises(TooManyQueuedJobsError):
            await limit.admit("t", 1, 1, counted=5)
    finally:
        await client.aclose()
