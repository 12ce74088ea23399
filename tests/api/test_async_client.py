"""AsyncClient: the same operations and errors as Client, on redis.asyncio and psycopg's async connections."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from contract.settings import Settings
from contract.wire import decode_job_entry
from producer import (
    AsyncClient,
    Client,
    EmptyTextError,
    InvalidJobError,
    InvalidJobIdError,
    InvalidMetadataError,
    JobNotCancellableError,
    JobNotFoundError,
    JobStatus,
    JobTimeoutError,
    TextTooLongError,
    TranslationRequest,
    UnsupportedLanguageError,
)
from producer.async_client import AsyncClient as AsyncClientDirect
from tests.waiting import FOREVER
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine


@pytest.fixture
async def aclient(settings: Settings) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(settings) as client:
        yield client


def test_it_is_the_public_one() -> None:
    assert AsyncClient is AsyncClientDirect


def test_it_needs_both_urls() -> None:
    from contract.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="both service URLs"):
        AsyncClient(Settings(redis_url=None, database_url=None))


async def test_submit_writes_what_client_writes(aclient: AsyncClient, client: Client, raw_redis: redis.Redis) -> None:
    a = await aclient.submit("Hello, world", "EN", "fr_fr", metadata={"doc": "a.txt"})
    b = client.submit("Hello, world", "EN", "fr_fr", metadata={"doc": "a.txt"})
    entries = {fields["id"]: fields for _, fields in raw_redis.xrange(aclient.keys.jobs_stream)}
    spec_a = decode_job_entry(entries[a], max_chars=100)
    spec_b = decode_job_entry(entries[b], max_chars=100)
    assert (spec_a.text, spec_a.source_lang, spec_a.target_lang, spec_a.metadata) == (
        spec_b.text,
        spec_b.source_lang,
        spec_b.target_lang,
        spec_b.metadata,
    )
    state_a, state_b = (raw_redis.hgetall(aclient.keys.state(i)) for i in (a, b))
    assert {k for k in state_a if k != "created_at"} == {k for k in state_b if k != "created_at"}
    assert (await aclient.get(a)).status is JobStatus.QUEUED
    assert (await aclient.get(b)) == client.get(b)


async def test_submit_many_in_chunks_and_in_order(settings: Settings, raw_redis: redis.Redis) -> None:
    async with AsyncClient(settings.model_copy(update={"submit_chunk_size": 7})) as aclient:
        ids = await aclient.submit_many([TranslationRequest(f"s{i}", "en", "fr") for i in range(20)])
        ids += await aclient.submit_many([{"text": "dict", "source_lang": "en", "target_lang": "de"}])
    assert len(set(ids)) == 21
    assert [fields["id"] for _, fields in raw_redis.xrange(aclient.keys.jobs_stream)] == ids


BAD: list[tuple[dict[str, Any], type[InvalidJobError]]] = [
    ({"text": " "}, EmptyTextError),
    ({"text": "x" * 10_001}, TextTooLongError),
    ({"source_lang": "not a language"}, UnsupportedLanguageError),
    ({"metadata": {"k": float("nan")}}, InvalidMetadataError),
    ({"idempotency_key": ""}, InvalidJobError),
]


@pytest.mark.parametrize(("change", "error"), BAD)
async def test_the_same_errors_as_client(
    aclient: AsyncClient, client: Client, raw_redis: redis.Redis, change: dict[str, Any], error: type[Exception]
) -> None:
    item: dict[str, Any] = {"text": "Hello", "source_lang": "en", "target_lang": "fr", **change}
    text, source, target = item.pop("text"), item.pop("source_lang"), item.pop("target_lang")
    with pytest.raises(error) as sync_error:
        client.submit(TranslationRequest(text, source, target, **item))
    with pytest.raises(error) as async_error:
        await aclient.submit(text, source, target, **item)
    assert str(async_error.value) == str(sync_error.value)
    item |= {"text": text, "source_lang": source, "target_lang": target}
    with pytest.raises(error, match="item 1"):
        await aclient.submit_many([{"text": "fine", "source_lang": "en", "target_lang": "fr"}, item])
    assert raw_redis.exists(aclient.keys.jobs_stream) == 0


async def test_lookups_and_cancel(aclient: AsyncClient) -> None:
    with pytest.raises(JobNotFoundError):
        await aclient.get(str(uuid.uuid4()))
    with pytest.raises(InvalidJobIdError):
        await aclient.get("nope")
    with pytest.raises(JobNotFoundError):
        await aclient.cancel(str(uuid.uuid4()))
    job_id = await aclient.submit("Hello", "en", "fr")
    with pytest.raises(JobTimeoutError, match="still queued"):
        await aclient.wait(job_id, timeout=0.1)
    assert (await aclient.cancel(job_id)).status is JobStatus.CANCELLED
    assert (await aclient.cancel(job_id)).status is JobStatus.CANCELLED


async def test_tenants_see_only_their_jobs(aclient: AsyncClient) -> None:
    job_id = await aclient.submit("Hello", "en", "fr", tenant="acme")
    assert (await aclient.get(job_id, tenant="acme")).tenant == "acme"
    assert (await aclient.get(job_id)).tenant == "acme"  # no tenant: the operator's view, every job
    with pytest.raises(JobNotFoundError):
        await aclient.get(job_id, tenant="globex")
    with pytest.raises(JobNotFoundError):
        await aclient.cancel(job_id, tenant="globex")
    assert (await aclient.get(job_id)).status is JobStatus.QUEUED
    with pytest.raises(InvalidJobError, match="tenant"):
        await aclient.submit("Hello", "en", "fr", tenant="no spaces:or colons")


async def test_wait_for_a_worker_then_cancel_is_refused(aclient: AsyncClient, start_worker: WorkerFactory) -> None:
    async with start_worker(DeterministicEngine()):
        job_id = await aclient.submit("Hello", "en", "fr", tenant="acme")
        job = await aclient.wait(job_id, timeout=FOREVER, tenant="acme")
    assert job.status is JobStatus.SUCCEEDED and job.translation == "Hello" and job.tenant == "acme"
    with pytest.raises(JobNotFoundError):
        await aclient.get(job_id, tenant="globex")
    with pytest.raises(JobNotCancellableError, match="already succeeded"):
        await aclient.cancel(job_id)


async def test_submit_many_names_what_was_written_when_redis_fails(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, raw_redis: redis.Redis
) -> None:
    """As the sync client: a Redis failure after a chunk went in says what was queued, and keys make a retry safe."""
    from broker.scripts import SubmitScript
    from contract.errors import SubmitInterruptedError

    items = [{"text": f"t{i}", "source_lang": "en", "target_lang": "fr", "idempotency_key": f"k{i}"} for i in range(5)]
    original = SubmitScript.call_many
    calls = 0

    async def failing(self: SubmitScript, *args: Any, **kwargs: Any) -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise redis.ConnectionError("Redis went away")
        return await original(self, *args, **kwargs)

    async with AsyncClient(settings.model_copy(update={"submit_chunk_size": 2})) as aclient:
        monkeypatch.setattr(SubmitScript, "call_many", failing)
        with pytest.raises(SubmitInterruptedError, match="after 2 of 5 jobs were queued") as error:
            await aclient.submit_many(items)
        monkeypatch.setattr(SubmitScript, "call_many", original)
        assert (await aclient.submit_many(items))[:2] == error.value.written
    assert raw_redis.xlen(aclient.keys.jobs_stream) == 5


async def test_wait_wakes_on_the_completion_event_not_at_its_next_poll(
    aclient: AsyncClient, start_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import producer.async_client as module

    # No poll and no safety read comes before the test's own timeout: only the completion event can end this wait.
    monkeypatch.setattr(module, "_SAFETY_POLL_S", FOREVER)
    monkeypatch.setattr(module, "_MAX_POLL_INTERVAL_S", FOREVER)
    job_id = await aclient.submit("Hello", "en", "fr")
    async with start_worker(DeterministicEngine()):
        job = await aclient.wait(job_id, timeout=FOREVER, poll_interval=FOREVER)
    assert job.status is JobStatus.SUCCEEDED


async def test_wait_polls_when_completion_events_cannot_be_received(
    aclient: AsyncClient, start_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker.finish_notices import FinishNotices

    async def refused(self: FinishNotices) -> None:
        raise redis.ConnectionError("no Pub/Sub here")

    monkeypatch.setattr(FinishNotices, "connect", refused)
    job_id = await aclient.submit("Hello", "en", "fr")
    async with start_worker(DeterministicEngine()):
        job = await aclient.wait(job_id, timeout=FOREVER)
    assert job.status is JobStatus.SUCCEEDED
