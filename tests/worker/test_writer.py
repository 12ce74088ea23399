"""The ResultWriter's upsert: a redelivered job never makes a second row or overwrites a success."""

from __future__ import annotations

import time
import uuid
from typing import Any

import redis
import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.scripts import SubmitScript
from contract.schemas import JobSpec, JobStatus
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.wire import encode_job_entry
from worker.results import DeadLetter, JobResult
from worker.writer import ResultWriter


def _result(spec: JobSpec, status: JobStatus, entry_id: str, **fields: Any) -> JobResult:
    now = time.time()
    return JobResult(entry_id=entry_id, spec=spec, status=status, attempts=1, started_at=now, finished_at=now, **fields)


async def _write(settings: Settings, urls: ServiceUrls, results: list[JobResult]) -> None:
    connection = aioredis.Redis.from_url(urls.redis_url, decode_responses=True)
    writer = ResultWriter(settings, connection, urls.database_url)
    for result in results:
        await writer.put(result)
    await writer.close()
    await writer.run()
    await connection.aclose()


async def test_a_success_is_never_overwritten(
    settings: Settings, service_urls: ServiceUrls, pg: Any, raw_redis: redis.Redis
) -> None:
    spec = JobSpec(
        job_id=str(uuid.uuid4()),
        text="Hello",
        source_lang="en",
        target_lang="fr",
        created_at=time.time(),
        metadata={"k": "v"},
    )
    await _write(settings, service_urls, [_result(spec, JobStatus.SUCCEEDED, "1-0", translation="Bonjour")])
    # A second delivery of the same job (say, after a reclaim) finishing differently:
    await _write(
        settings,
        service_urls,
        [
            _result(spec, JobStatus.SUCCEEDED, "1-0", translation="Salut"),
            _result(spec, JobStatus.FAILED, "1-0", error="boom"),
        ],
    )
    rows = pg.execute("SELECT status, translated_text, metadata FROM jobs WHERE id = %s", (spec.job_id,)).fetchall()
    assert rows == [("succeeded", "Bonjour", {"k": "v"})]
    events = raw_redis.xrange(RedisKeys.from_settings(settings).events_stream)
    # Every event says what the row says, even for the duplicate delivery.
    assert [f["status"] for _, f in events] == ["succeeded", "succeeded"]


async def test_a_failure_can_be_replaced_by_a_later_success(
    settings: Settings, service_urls: ServiceUrls, pg: Any
) -> None:
    spec = JobSpec(job_id=str(uuid.uuid4()), text="Hello", source_lang="en", target_lang="fr", created_at=time.time())
    await _write(settings, service_urls, [_result(spec, JobStatus.FAILED, "1-0", error="engine hiccup")])
    await _write(settings, service_urls, [_result(spec, JobStatus.SUCCEEDED, "2-0", translation="Bonjour")])
    row = pg.execute("SELECT status, translated_text FROM jobs WHERE id = %s", (spec.job_id,)).fetchone()
    assert row == ("succeeded", "Bonjour")


async def test_finishing_uncounts_each_tenant_s_job_by_its_spec_or_its_malformed_payload(
    settings: Settings, service_urls: ServiceUrls, raw_redis: redis.Redis
) -> None:
    """FINISH is given the tenant's set in KEYS: the tenant comes from what the worker holds, not the record."""
    keys = RedisKeys.from_settings(settings)
    submit = SubmitScript(keys, settings.state_ttl_seconds, settings.idempotency_ttl_seconds)
    spec = JobSpec(
        job_id=str(uuid.uuid4()), text="Hi", source_lang="en", target_lang="fr", created_at=1.0, tenant="acme"
    )
    bad = JobSpec(
        job_id=str(uuid.uuid4()), text="Hi", source_lang="en", target_lang="fr", created_at=1.0, tenant="acme"
    )
    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    await submit.call_many(connection, [(spec, None), (bad, None)])
    raw_redis.delete(keys.state(spec.job_id))  # expired meanwhile: the tenant is still known
    assert raw_redis.zcard(keys.tenant_queued("acme")) == 2
    malformed = DeadLetter(
        entry_id="2-0",
        fields={**encode_job_entry(bad), "v": "999"},
        reason="unknown schema version",
        job_id=bad.job_id,
        finished_at=time.time(),
    )
    writer = ResultWriter(settings, connection, service_urls.database_url)
    await writer.put(_result(spec, JobStatus.SUCCEEDED, "1-0", translation="Salut"))
    await writer.put(malformed)
    await writer.close()
    await writer.run()
    await connection.aclose()
    assert raw_redis.zcard(keys.tenant_queued("acme")) == 0
    entries: Any = raw_redis.xrange(keys.events_stream)
    events = {fields["id"]: fields for _, fields in entries}
    assert events[spec.job_id]["tenant"] == events[bad.job_id]["tenant"] == "acme"
