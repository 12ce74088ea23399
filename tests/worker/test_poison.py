"""Poison stays one job's problem: no value, entry or crash of one job stops a worker or wedges the queue.

Each test is a class of fault reproduced against the worker as it was: a value PostgreSQL
refuses, an entry with the wrong JSON types or absurd nesting, a state record that is not a
hash, an error decoding one entry, a crash of the reader.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from broker.dead_letters import DeadLetters
from broker.keys import RedisKeys
from contract.errors import InvalidJobError
from contract.schemas import JobSpec, JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from tests.waiting import until
from worker import consumer as consumer_module
from worker.deterministic_engine import DeterministicEngine
from worker.results import DeadLetter, JobResult
from worker.writer import ResultWriter

from .conftest import WorkerFactory, identity_worker, wait_all


def _pending(raw: redis.Redis, client: Client) -> int:
    return int(raw.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"])


def _xadd(raw: redis.Redis, client: Client, payload: str, job_id: str | None = None) -> str:
    job_id = job_id or str(uuid.uuid4())
    raw.xadd(client.keys.jobs_stream, {"v": "1", "id": job_id, "payload": payload})
    return job_id


async def _dead_letters(raw: redis.Redis, client: Client, count: int) -> list[Any]:
    await until(lambda: raw.xlen(client.keys.dead_letter_stream) >= count, f"{count} dead letters", every=0.01)
    async with aioredis.Redis.from_url(client.settings.redis_url or "", decode_responses=True) as connection:
        return await DeadLetters(connection, client.settings).entries()


# A value PostgreSQL refuses -------------------------------------------------------------------


def _spec(**fields: Any) -> JobSpec:
    values: dict[str, Any] = {
        "job_id": str(uuid.uuid4()),
        "text": "Hello",
        "source_lang": "en",
        "target_lang": "fr",
        "created_at": time.time(),
    }
    return JobSpec(**(values | fields))


def _result(spec: JobSpec, n: int, **fields: Any) -> JobResult:
    now = time.time()
    values: dict[str, Any] = {"status": JobStatus.SUCCEEDED, "translation": "Bonjour"} | fields
    return JobResult(entry_id=f"{n + 1}-0", spec=spec, attempts=1, started_at=now, finished_at=now, **values)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


# Specs the submit-time checks never let through (they are built by hand here), as a producer
# with its own encoder, or a check that misses a case, could still hand them to the worker.
UNSTORABLE = {
    "NUL in a metadata key": {"metadata": {"a\x00b": 1}},
    "NUL in the text": {"text": "a\x00b"},
    "lone surrogate in metadata": {"metadata": {"k": "a\ud800b"}},
    "metadata nested past what the encoder takes": {"metadata": {"k": _nested(5000)}},
    "sequence over the integer column": {"sequence": 2**40},
    "created_at past year 9999": {"created_at": 1e300},
}


async def test_a_value_postgres_refuses_fails_only_its_row_and_the_writer_goes_on(
    settings: Settings, service_urls: ServiceUrls, pg: Any, raw_redis: redis.Redis
) -> None:
    good = [_spec(text=f"fine {i}") for i in range(20)]
    bad = [_spec(**fields) for fields in UNSTORABLE.values()]
    # The last bad one had crashed every worker before: it is dead-lettered as well.
    specs = good[:7] + bad[:3] + good[7:15] + bad[3:] + good[15:]
    results = [_result(spec, n, dead_letter=spec is bad[-1]) for n, spec in enumerate(specs)]
    malformed = DeadLetter(
        entry_id="100-0",
        fields={"v": "1", "id": "x", "payload": json.dumps({"text": "t", "source_lang": "en\x00"})},
        reason="a reason",
        job_id=str(uuid.uuid4()),
        finished_at=time.time(),
    )
    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    writer = ResultWriter(
        settings.model_copy(update={"writer_batch_size": 1000}), connection, service_urls.database_url
    )
    for item in [*results, malformed]:
        await writer.put(item)
    await writer.close()
    await asyncio.wait_for(writer.run(), timeout=30)  # returns: no data error ends the writer
    await connection.aclose()

    ids = [spec.job_id for spec in specs]
    rows = {
        row[0]: row[1:]
        for row in pg.execute(
            "SELECT id::text, status, translated_text, error, source_text, metadata, sequence FROM jobs "
            "WHERE id = ANY(%s::uuid[])",
            ([*ids, malformed.job_id],),
        ).fetchall()
    }
    assert len(rows) == len(specs) + 1
    for spec in good:
        assert rows[spec.job_id][:2] == ("succeeded", "Bonjour")
    for spec, name in zip(bad, UNSTORABLE, strict=True):
        status, translation, error, text, metadata, sequence = rows[spec.job_id]
        assert (status, translation) == ("failed", None), name
        assert error and "could not be stored" in error, name
        assert "\x00" not in text and sequence is None, name
        assert isinstance(metadata, dict), name
    assert rows[malformed.job_id][:3] == ("failed", None, "a reason")
    events = {f["id"]: f["status"] for _, f in raw_redis.xrange(RedisKeys.from_settings(settings).events_stream)}
    assert events == {**{s.job_id: "succeeded" for s in good}, **dict.fromkeys([s.job_id for s in bad], "failed")} | {
        malformed.job_id: "failed"
    }
    assert writer.stats.rows == len(specs) + 1


async def test_submit_refuses_every_value_the_database_cannot_store(client: Client) -> None:
    refused: list[dict[str, Any]] = [
        {"metadata": {"a\x00b": 1}},
        {"metadata": {"k": "a\ud800b"}},
        {"metadata": {"k\udc80": "v"}},
        {"metadata": {"k": [{"deep": "a\x00"}]}},
        {"metadata": {"k": _nested(100)}},
        {"metadata": {"k": "x" * 100_000}},
        {"text": "a lone \ud800 surrogate"},
    ]
    for fields in refused:
        values = {"text": "Hello"} | fields
        with pytest.raises(InvalidJobError):
            client.submit(values.pop("text"), "en", "fr", **values)


async def test_a_metadata_key_postgres_refuses_from_a_plain_xadd_is_dead_lettered_not_fatal(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory
) -> None:
    payload = json.dumps({"text": "hi", "source_lang": "en", "target_lang": "fr", "metadata": {"a\x00": 1}})
    bad_id = _xadd(raw_redis, client, payload)
    good = client.submit("still works", "en", "fr")
    async with start_worker(DeterministicEngine()) as worker:
        failed, job = await wait_all(client, [bad_id, good])
        assert not worker._writer.done() and not worker._reader.done()
    assert job.status is JobStatus.SUCCEEDED
    assert failed.status is JobStatus.FAILED and failed.error and "NUL" in failed.error
    assert _pending(raw_redis, client) == 0


# Entries with the wrong JSON types or absurd nesting ------------------------------------------


def _deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


BAD_ENTRIES = {
    "language that is a list": ('{"text": "x", "source_lang": ["en"], "target_lang": "fr"}', "language code"),
    "language that is an object": ('{"text": "x", "source_lang": "en", "target_lang": {"a": 1}}', "language code"),
    "run id that is a list": ('{"text": "x", "source_lang": "en", "target_lang": "fr", "run_id": [1]}', "'run_id'"),
    "document id that is a number": (
        '{"text": "x", "source_lang": "en", "target_lang": "fr", "document_id": 12345678901234567890}',
        "'document_id'",
    ),
    "metadata nested past any stack": (
        f'{{"text": "x", "source_lang": "en", "target_lang": "fr", "metadata": {{"k": {_deep_json(100_000)}}}}}',
        "nested",
    ),
    "metadata nested deeper than allowed": (
        f'{{"text": "x", "source_lang": "en", "target_lang": "fr", "metadata": {{"k": {_deep_json(200)}}}}}',
        "nested",
    ),
    "created_at nested deep": (
        f'{{"text": "x", "source_lang": "en", "target_lang": "fr", "created_at": {_deep_json(900)}}}',
        "created_at",
    ),
    "metadata too large": (
        json.dumps({"text": "x", "source_lang": "en", "target_lang": "fr", "metadata": {"k": "v" * 100_000}}),
        "metadata",
    ),
}


@pytest.mark.parametrize(("payload", "reason"), BAD_ENTRIES.values(), ids=BAD_ENTRIES.keys())
async def test_an_entry_with_wrong_types_or_absurd_nesting_is_dead_lettered(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory, payload: str, reason: str
) -> None:
    bad_id = _xadd(raw_redis, client, payload)
    good = client.submit("still works", "en", "fr")
    async with start_worker(DeterministicEngine()):
        failed, job = await wait_all(client, [bad_id, good])
        [letter] = await _dead_letters(raw_redis, client, 1)
    assert job.status is JobStatus.SUCCEEDED
    assert failed.status is JobStatus.FAILED and failed.error and reason in failed.error
    assert reason in letter.reason and len(letter.reason) < 1000
    assert _pending(raw_redis, client) == 0


async def test_any_error_decoding_one_entry_dead_letters_it_and_the_worker_goes_on(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_decode = consumer_module.decode_job_entry

    def decode(fields: Any, *, max_chars: int) -> JobSpec:
        if "explode" in fields.get("payload", ""):
            raise KeyError("a bug in decoding \x00 this one entry")
        return real_decode(fields, max_chars=max_chars)

    monkeypatch.setattr(consumer_module, "decode_job_entry", decode)
    bad_id = client.submit("explode", "en", "fr")
    good = client.submit("still works", "en", "fr")
    async with start_worker(DeterministicEngine()):
        failed, job = await wait_all(client, [bad_id, good])
        [letter] = await _dead_letters(raw_redis, client, 1)
    assert job.status is JobStatus.SUCCEEDED
    assert failed.status is JobStatus.FAILED and failed.error and "KeyError" in failed.error
    assert "KeyError" in letter.reason and letter.job_id == bad_id
    assert _pending(raw_redis, client) == 0


async def test_an_entry_whose_state_record_is_not_a_hash_is_dead_lettered(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory
) -> None:
    bad_id = str(uuid.uuid4())
    raw_redis.set(client.keys.state(bad_id), "not a hash")  # the start script's HGET fails on it
    _xadd(raw_redis, client, json.dumps({"text": "x", "source_lang": "en", "target_lang": "fr"}), bad_id)
    goods = client.submit_many([TranslationRequest("one", "en", "fr"), TranslationRequest("two", "en", "fr")])
    async with start_worker(DeterministicEngine()):
        jobs = await wait_all(client, goods)
        [letter] = await _dead_letters(raw_redis, client, 1)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 2
    assert letter.job_id == bad_id and "WRONGTYPE" in letter.reason
    assert raw_redis.get(client.keys.state(bad_id)) == "not a hash"  # left for an operator to look at
    assert _pending(raw_redis, client) == 0


# A crash still flushes ------------------------------------------------------------------------


async def test_a_crashed_reader_still_drains_flushes_and_exits_non_zero(
    client: Client, settings: Settings, service_urls: ServiceUrls, pg: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine = DeterministicEngine(delay_s=0.5)
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(4))
    worker = identity_worker(settings, service_urls, engine, max_in_flight=4)

    async def crash(*_: Any) -> Any:
        raise RuntimeError("a bug in the reader")

    serving = asyncio.create_task(worker.serve(asyncio.Event()))
    while engine.in_flight < 4:
        await asyncio.sleep(0.01)
    worker.consumer.take_free_slots = crash  # type: ignore[method-assign]
    worker.consumer.release_slots(1)  # wake the reader, which now crashes
    assert await asyncio.wait_for(serving, timeout=30) == 1
    rows = pg.execute("SELECT status FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
    assert rows == [("succeeded",)] * 4  # the jobs that were running were finished and written
    assert "a bug in the reader" in caplog.text
