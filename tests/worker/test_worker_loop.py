"""The worker loop with a deterministic engine, against real Redis Streams and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
import pytest
import redis
import redis.asyncio as aioredis

from broker.dead_letters import DeadLetters
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.writer import ResultWriter

from .conftest import WorkerFactory, identity_worker, wait_all


def _rows(pg: Any, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    rows = pg.execute(
        "SELECT id::text, status, translated_text, error, attempts FROM jobs WHERE id = ANY(%s::uuid[])",
        (ids,),
    ).fetchall()
    return {row[0]: row[1:] for row in rows}


def _pending(raw: redis.Redis, client: Client) -> int:
    return int(raw.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"])


async def test_jobs_become_rows_events_and_acks(
    client: Client, raw_redis: redis.Redis, pg: Any, start_worker: WorkerFactory
) -> None:
    texts = [f"sentence {i} " + "word " * (i % 40) for i in range(300)]
    ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
    async with start_worker(DeterministicEngine(), max_in_flight=32):
        jobs = await wait_all(client, ids)

    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 300
    assert [j.translation for j in jobs] == texts  # the identity profile echoes the text
    assert all(j.attempts == 1 and j.model == "default" for j in jobs)
    assert all(j.started_at and j.finished_at and j.created_at for j in jobs)
    rows = _rows(pg, ids)
    assert len(rows) == 300
    assert _pending(raw_redis, client) == 0

    events = raw_redis.xrange(client.keys.events_stream)
    assert sorted(f["id"] for _, f in events) == sorted(ids)
    for _, fields in events:
        assert fields["status"] == rows[fields["id"]][0] == "succeeded"
        assert json.loads(fields["payload"])["job_id"] == fields["id"]
    states = {raw_redis.hget(client.keys.state(i), "status") for i in ids}
    assert states == {"succeeded"}


async def test_in_flight_never_exceeds_its_bound(client: Client, start_worker: WorkerFactory) -> None:
    engine = DeterministicEngine(delay_s=0.02)
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(200))
    async with start_worker(engine, max_in_flight=8) as worker:
        peak = 0
        while not all(j.status.is_final for j in await asyncio.to_thread(lambda: [client.get(i) for i in ids[-5:]])):
            peak = max(peak, worker.consumer.in_flight)
            await asyncio.sleep(0.005)
        await wait_all(client, ids)
    assert engine.peak_in_flight <= 8
    assert peak <= 8
    assert engine.peak_in_flight == 8  # and the engine was kept full


async def test_nothing_is_acked_before_its_row_is_committed(
    client: Client, raw_redis: redis.Redis, service_urls: ServiceUrls, start_worker: WorkerFactory
) -> None:
    violations: list[str] = []
    checked = 0
    original = ResultWriter._acknowledge

    async def checking_acknowledge(self: ResultWriter, batch: Any, events: Any, dead: Any) -> None:
        nonlocal checked
        ids = [item.spec.job_id for item in batch]
        async with await psycopg.AsyncConnection.connect(libpq_url(service_urls.database_url)) as conn:
            cursor = await conn.execute("SELECT count(*) FROM jobs WHERE id = ANY(%s::uuid[])", (ids,))
            (committed,) = await cursor.fetchone() or (0,)
        if committed != len(set(ids)):
            violations.append(f"{len(ids) - committed} of {len(ids)} acked without a committed row")
        still_pending = raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"]
        if still_pending < len(ids):
            violations.append("entries were acked before the ack step")
        checked += len(ids)
        await original(self, batch, events, dead)

    ResultWriter._acknowledge = checking_acknowledge  # type: ignore[method-assign]
    try:
        ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(150))
        async with start_worker(DeterministicEngine(delay_s=0.001)):
            await wait_all(client, ids)
    finally:
        ResultWriter._acknowledge = original  # type: ignore[method-assign]
    assert checked == 150
    assert violations == []


async def test_shutdown_lets_running_jobs_finish_and_leaves_the_rest_queued(
    client: Client, raw_redis: redis.Redis, pg: Any, settings: Settings, service_urls: ServiceUrls
) -> None:
    engine = DeterministicEngine(delay_s=0.5)
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(20))
    worker = identity_worker(settings, service_urls, engine, max_in_flight=4)
    await worker.start()
    while engine.in_flight < 4:
        await asyncio.sleep(0.01)
    assert await worker.stop(grace_seconds=10) == 0

    rows = _rows(pg, ids)
    assert len(rows) == 4 and {r[0] for r in rows.values()} == {"succeeded"}
    assert _pending(raw_redis, client) == 0  # everything read was finished and acked
    assert sum(client.get(i).status is JobStatus.QUEUED for i in ids) == 16


async def test_shutdown_past_the_grace_period_leaves_jobs_pending(
    client: Client, raw_redis: redis.Redis, pg: Any, settings: Settings, service_urls: ServiceUrls
) -> None:
    engine = DeterministicEngine(delay_s=60)
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(3))
    worker = identity_worker(settings, service_urls, engine, max_in_flight=8)
    await worker.start()
    while engine.in_flight < 3:
        await asyncio.sleep(0.01)
    assert await worker.stop(grace_seconds=0.2) == 3
    assert _rows(pg, ids) == {}
    assert _pending(raw_redis, client) == 3  # un-acked, for another worker to reclaim


async def test_an_engine_error_fails_only_its_job(client: Client, pg: Any, start_worker: WorkerFactory) -> None:
    engine = DeterministicEngine(fail_if=lambda prompt: "POISON" in prompt)
    texts = [f"fine {i}" for i in range(10)]
    texts[4] = "POISON pill"
    ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
    async with start_worker(engine):
        jobs = await wait_all(client, ids)
    poisoned = jobs[4]
    assert poisoned.status is JobStatus.FAILED
    assert poisoned.error and "EngineError" in poisoned.error and "POISON" in poisoned.error
    assert poisoned.attempts == client.settings.max_attempts
    assert [j.status for j in jobs[:4] + jobs[5:]] == [JobStatus.SUCCEEDED] * 9


async def test_input_longer_than_the_context_is_translated_in_pieces(
    client: Client, start_worker: WorkerFactory
) -> None:
    """It used to fail ("prompt is 80 tokens, context is 64"); now it is cut, even inside one long word."""
    ids = client.submit_many([TranslationRequest("x" * 320, "en", "fr"), TranslationRequest("short", "en", "fr")])
    async with start_worker(DeterministicEngine(max_model_len=64)):
        long, fine = await wait_all(client, ids)
    assert long.status is JobStatus.SUCCEEDED and long.translation == "x" * 320
    assert long.pieces and long.pieces > 1 and long.finish_reason == "stop"
    assert long.attempts == 1
    assert fine.status is JobStatus.SUCCEEDED and fine.pieces == 1 and fine.finish_reason == "stop"


async def test_a_job_cancelled_while_queued_is_skipped(client: Client, start_worker: WorkerFactory) -> None:
    engine = DeterministicEngine()
    keep, drop = client.submit("keep me", "en", "fr"), client.submit("drop me", "en", "fr")
    client.cancel(drop)
    async with start_worker(engine):
        kept, dropped = await wait_all(client, [keep, drop])
    assert kept.status is JobStatus.SUCCEEDED
    assert dropped.status is JobStatus.CANCELLED and dropped.translation is None
    assert engine.requests == 1


async def test_a_running_job_is_aborted_in_the_engine(client: Client, start_worker: WorkerFactory) -> None:
    engine = DeterministicEngine(delay_for=lambda prompt: 60.0 if prompt == "slow" else 0.0)
    slow = client.submit("slow", "en", "fr")
    async with start_worker(engine):
        while client.get(slow).status is not JobStatus.RUNNING or engine.in_flight == 0:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(client.cancel, slow)
        [job] = await wait_all(client, [slow])
    assert job.status is JobStatus.CANCELLED
    assert engine.aborted and engine.aborted[0].startswith(slow)


async def test_malformed_entries_are_dead_lettered_and_the_worker_keeps_going(
    client: Client, raw_redis: redis.Redis, pg: Any, start_worker: WorkerFactory
) -> None:
    stream = client.keys.jobs_stream
    bad_id = str(uuid.uuid4())
    raw_redis.xadd(stream, {"v": "1", "id": bad_id, "payload": "{not json"})
    raw_redis.xadd(stream, {"garbage": "yes"})
    bad_language = json.dumps({"text": "hi", "source_lang": "en", "target_lang": "xx"})
    raw_redis.xadd(stream, {"v": "1", "id": str(uuid.uuid4()), "payload": bad_language})
    good = client.submit("still works", "en", "fr")
    async with start_worker(DeterministicEngine()):
        [job] = await wait_all(client, [good])
        while raw_redis.xlen(client.keys.dead_letter_stream) < 3:
            await asyncio.sleep(0.01)
    assert job.status is JobStatus.SUCCEEDED
    letters = [fields for _, fields in raw_redis.xrange(client.keys.dead_letter_stream)]
    reasons = [letter["reason"] for letter in letters]
    assert "not JSON" in reasons[0] and "unsupported schema version" in reasons[1]
    assert "unknown language code 'xx'" in reasons[2]
    assert letters[0]["payload"] == "{not json"  # the original entry is kept for inspection
    failed = client.get(bad_id)
    assert failed.status is JobStatus.FAILED and failed.error and "not JSON" in failed.error
    assert _pending(raw_redis, client) == 0


async def test_entries_that_are_not_valid_unicode_are_dead_lettered_not_fatal(
    client: Client, raw_redis: redis.Redis, async_redis: aioredis.Redis, start_worker: WorkerFactory
) -> None:
    stream = client.keys.jobs_stream
    surrogate_id = str(uuid.uuid4())  # JSON may escape a lone surrogate, which no database can store
    raw_redis.xadd(
        stream,
        {
            "v": "1",
            "id": surrogate_id,
            "payload": '{"text": "bad \\ud800 text", "source_lang": "en", "target_lang": "fr"}',
        },
    )
    raw_redis.xadd(stream, {"v": "1", "id": str(uuid.uuid4()), "payload": b"\xff\xfe not UTF-8"})
    good = client.submit("still works", "en", "fr")
    async with start_worker(DeterministicEngine()):
        [job] = await wait_all(client, [good])
        while raw_redis.xlen(client.keys.dead_letter_stream) < 2:
            await asyncio.sleep(0.01)
    assert job.status is JobStatus.SUCCEEDED
    failed = client.get(surrogate_id)
    assert failed.status is JobStatus.FAILED and failed.error and "not JSON" in failed.error
    surrogate, not_utf8 = await DeadLetters(async_redis, client.settings).entries()  # readable with strict UTF-8
    assert "not JSON" in surrogate.reason
    assert not_utf8.reason == "field 'payload' is not valid UTF-8"
    assert not_utf8.fields["payload"] == "\ufffd\ufffd not UTF-8"  # the invalid bytes, shown as such
    assert _pending(raw_redis, client) == 0


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"created_at": 1e30}, "'created_at' must be unix seconds"),
        ({"created_at": -1e15}, "'created_at' must be unix seconds"),
        ({"sequence": 2**40}, "'sequence' must be an integer"),
        ({"sequence": -1}, "'sequence' must be an integer"),
    ],
)
async def test_values_the_database_cannot_hold_are_dead_lettered_not_fatal(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory, extra: dict[str, Any], reason: str
) -> None:
    bad_id = str(uuid.uuid4())
    payload = json.dumps({"text": "hi", "source_lang": "en", "target_lang": "fr", **extra})
    raw_redis.xadd(client.keys.jobs_stream, {"v": "1", "id": bad_id, "payload": payload})
    good = client.submit("still works", "en", "fr")
    async with start_worker(DeterministicEngine()):
        [job, failed] = await wait_all(client, [good, bad_id])
    assert job.status is JobStatus.SUCCEEDED
    assert failed.status is JobStatus.FAILED and failed.error and reason in failed.error
    assert _pending(raw_redis, client) == 0


class UnstorableOutputEngine(DeterministicEngine):
    """Translates with a NUL in the text, and fails with an error message PostgreSQL cannot store."""

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        result = await super().generate(request)
        if self.tokenizer.decode(request.prompt_token_ids) == "fail":
            raise RuntimeError("bad \x00 byte and a lone \ud800 surrogate")
        return GenerationResult(token_ids=[*result.token_ids, 0x41004100], finish_reason="stop")  # "A\0A\0"


async def test_output_and_errors_postgres_cannot_store_are_stored_readably(
    client: Client, start_worker: WorkerFactory
) -> None:
    ids = client.submit_many([TranslationRequest("fine", "en", "fr"), TranslationRequest("fail", "en", "fr")])
    async with start_worker(UnstorableOutputEngine()):
        translated, failed = await wait_all(client, ids)
    assert translated.status is JobStatus.SUCCEEDED and translated.translation == "fineAA"
    assert failed.status is JobStatus.FAILED
    assert failed.error == "RuntimeError: bad \ufffd byte and a lone ? surrogate"


async def test_an_entry_from_a_plain_xadd_producer_is_translated(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory
) -> None:
    job_id = str(uuid.uuid4())
    raw_redis.xadd(
        client.keys.jobs_stream,
        {"v": "1", "id": job_id, "payload": json.dumps({"text": "from Go", "source_lang": "en", "target_lang": "fr"})},
    )
    async with start_worker(DeterministicEngine()):
        [job] = await wait_all(client, [job_id])
    assert (job.status, job.translation) == (JobStatus.SUCCEEDED, "from Go")


async def test_stop_always_returns_even_when_redis_swallows_a_cancel(
    settings: Settings, service_urls: ServiceUrls
) -> None:
    # redis-py sometimes swallows a cancellation inside a blocking XREADGROUP; stopping must not
    # depend on it (a few percent of cancels hit that window, so try many times).
    for attempt in range(20):
        engine = DeterministicEngine()
        worker = identity_worker(settings, service_urls, engine, max_in_flight=4)
        await worker.start()
        await asyncio.sleep(0.003 * (attempt % 20))
        await asyncio.wait_for(worker.stop(grace_seconds=1), timeout=10)
