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
from broker.queued_limit import LEASE_SECONDS, QueuedJobLimit, TooManyQueuedJobsError
from contract.schemas import JobSpec, TranslationRequest
from contract.settings import Settings
from producer.async_client import AsyncClient
from producer.requests import prepare
from tests.api.conftest import WAIT, KeyMaker, bearer
from tests.waiting import until
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

    async def taken() -> httpx.Response | None:  # the three earlier jobs finish first; then there is room
        retried = await http.post(f"/v1/jobs?{WAIT}", json=JOB, headers=bearer(small))
        return None if retried.status_code == 429 else retried

    async with start_worker(DeterministicEngine()):
        retried = await until(taken, "room under the key's limit, the retried submit taken")
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


async def test_concurrent_submissions_are_admitted_exactly_up_to_the_limit(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    """Issue 33: 25 concurrent submissions of 5 jobs against a limit of 5 queued 120 jobs (count, then submit)."""
    key = tenant_key("racer", max_queued_jobs=5)
    answers = await asyncio.gather(*(http.post("/v1/jobs", json=[JOB] * 5, headers=bearer(key)) for _ in range(25)))
    admitted = [answer for answer in answers if answer.status_code == 202]
    refused = [answer for answer in answers if answer.status_code == 429]
    assert (len(admitted), len(refused)) == (1, 24), [answer.status_code for answer in answers]
    assert all(answer.headers["Retry-After"] == "10" for answer in refused)
    assert all(answer.json()["error"]["code"] == "too_many_queued_jobs" for answer in refused)
    keys = RedisKeys.from_settings(settings)
    assert raw_redis.xlen(keys.jobs_stream) == 5
    members = raw_redis.zrange(_tenant_key(raw_redis, keys, "racer", "queued"), 0, -1)
    assert sorted(members) == sorted(admitted[0].json()["ids"])


async def test_concurrent_single_jobs_are_admitted_exactly_up_to_the_limit(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key = tenant_key("racer", max_queued_jobs=3)
    answers = await asyncio.gather(*(http.post("/v1/jobs", json=JOB, headers=bearer(key)) for _ in range(20)))
    assert sorted(answer.status_code for answer in answers) == [202] * 3 + [429] * 17
    assert raw_redis.xlen(RedisKeys.from_settings(settings).jobs_stream) == 3


async def test_concurrent_runs_are_admitted_exactly_up_to_the_limit(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key = tenant_key("racer", max_queued_jobs=5)
    answers = await asyncio.gather(
        *(
            http.post("/v1/runs?source_lang=en&target_lang=fr", content=TWO_LINES, headers=bearer(key))
            for _ in range(10)
        )
    )
    assert sorted(answer.status_code for answer in answers) == [202] * 2 + [429] * 8, [a.text for a in answers]
    keys = RedisKeys.from_settings(settings)
    assert raw_redis.xlen(keys.bulk_jobs_stream) == 4  # a run's jobs wait in the bulk lane
    assert raw_redis.zcard(_tenant_key(raw_redis, keys, "racer", "queued")) == 4
    # Every reservation claimed or given back.
    assert raw_redis.hlen(_tenant_key(raw_redis, keys, "racer", "reserved")) == 0


async def test_concurrent_batches_are_admitted_exactly_up_to_the_limit(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key = tenant_key("racer", max_queued_jobs=3)
    line = {"custom_id": "x", "method": "POST", "url": "/v1/translations", "body": JOB}
    content = b"".join(json.dumps({**line, "custom_id": str(n)}).encode() + b"\n" for n in range(2))
    uploaded = await http.post(
        "/v1/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}, headers=bearer(key)
    )
    body = {"input_file_id": uploaded.json()["id"], "endpoint": "/v1/translations", "completion_window": "24h"}
    answers = await asyncio.gather(*(http.post("/v1/batches", json=body, headers=bearer(key)) for _ in range(6)))
    assert all(answer.status_code == 200 for answer in answers), [answer.text for answer in answers]
    statuses = sorted(answer.json()["status"] for answer in answers)
    assert statuses == ["failed"] * 5 + ["in_progress"], statuses
    keys = RedisKeys.from_settings(settings)
    assert raw_redis.xlen(keys.bulk_jobs_stream) == 2
    assert raw_redis.hlen(_tenant_key(raw_redis, keys, "racer", "reserved")) == 0


async def test_a_retry_with_its_idempotency_key_at_the_limit_answers_the_same_job(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    """The job an idempotency key names is counted already: asking again takes no second place."""
    key = tenant_key("small", max_queued_jobs=1)
    first = await http.post("/v1/jobs", json={**JOB, "idempotency_key": "order-7"}, headers=bearer(key))
    again = await http.post("/v1/jobs", json={**JOB, "idempotency_key": "order-7"}, headers=bearer(key))
    assert first.status_code == again.status_code == 202, again.text
    assert again.json()["id"] == first.json()["id"]
    keys = RedisKeys.from_settings(settings)
    assert raw_redis.zrange(_tenant_key(raw_redis, keys, "small", "queued"), 0, -1) == [first.json()["id"]]
    _refused(await http.post("/v1/jobs", json=JOB, headers=bearer(key)), 429, "too_many_queued_jobs")


async def test_a_reservation_is_claimed_given_back_and_ages_out(service_urls: object, settings: Settings) -> None:
    keys = RedisKeys.from_settings(settings)
    client = aioredis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    limit = QueuedJobLimit(client, keys, state_ttl_seconds=86_400)
    try:
        run = await limit.reserve("t", 5, 4)  # a run of 4: a number, claimed by id as it is queued
        assert await limit.count("t") == 4
        with pytest.raises(TooManyQueuedJobsError):
            await limit.reserve("t", 5, 2)
        await run.claim(["a", "b"])
        assert await limit.count("t") == 4  # two moved from the number into the set: nothing counted twice
        await limit.check("t", 5, 1)
        await run.release()  # done after two: the rest is given back, and "a", "b" never queued leave too
        await run.release(["a", "b"])
        assert await limit.count("t") == 0
        named = await limit.admit_jobs("t", 5, [(_job("c"), None), (_job("d"), None)])
        assert await limit.count("t") == 2
        assert await limit.count("t", now=time.time() + LEASE_SECONDS + 1) == 0  # never submitted: aged out
        await named.release()
        lapsed = await limit.reserve("t", 5, 5)  # the server died holding it: it lapses after the lease
        assert await limit.count("t", now=time.time() + LEASE_SECONDS + 1) == 0
        await lapsed.release()
    finally:
        await client.aclose()


async def test_a_submitted_job_keeps_its_place_when_its_reservation_is_released(
    service_urls: object, settings: Settings, raw_redis: redis.Redis
) -> None:
    """SUBMIT re-scores a reserved member with the job's created_at: queued jobs neither age out nor are released."""
    keys = RedisKeys.from_settings(settings)
    client = AsyncClient(settings)
    limit = QueuedJobLimit(client.redis, keys, state_ttl_seconds=settings.state_ttl_seconds)
    try:
        prepared = [prepare(settings, TranslationRequest("Hello.", "en", "fr"), tenant="t")]
        reservation = await limit.admit_jobs("t", 5, prepared)
        await client.submitter.write(prepared)
        await reservation.release()
        assert await limit.count("t", now=time.time() + LEASE_SECONDS + 1) == 1
    finally:
        await client.close()


def _tenant_key(raw_redis: redis.Redis, keys: RedisKeys, name: str, kind: str) -> str:
    """The key of kind ``kind`` of this test's tenant ``name`` (``tenant_key`` adds a suffix), or its name unwritten."""
    found = [str(key) for key in raw_redis.scan_iter(match=f"{keys.tag}:tenant:{name}-*:{kind}")]
    assert len(found) <= 1, found
    return found[0] if found else keys.tenant_queued(name)


def _job(job_id: str) -> JobSpec:
    return JobSpec(job_id=job_id, text="Hi.", source_lang="en", target_lang="fr", created_at=time.time(), tenant="t")
