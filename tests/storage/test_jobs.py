"""The ``jobs`` table's writer: one statement per batch, and a final row is never overwritten."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from contract.schemas import JobStatus
from contract.services import ServiceUrls
from storage import (
    DatabaseUnavailableError,
    FinalRow,
    JobRowWriter,
    JobStore,
    RowRecord,
    UnstorableRowError,
    storable_failure,
)


def _record(job_id: str | None = None, status: str = "succeeded", **fields: Any) -> RowRecord:
    now = time.time()
    values: dict[str, Any] = {
        "id": job_id or str(uuid.uuid4()),
        "status": status,
        "source_lang": "en",
        "target_lang": "fr",
        "source_text": "Hello",
        "translated_text": "Bonjour" if status == "succeeded" else None,
        "error": None if status == "succeeded" else f"{status} here",
        "attempts": 1,
        "model": "test",
        "prompt_tokens": 3,
        "output_tokens": 4,
        "created_at": now - 2,
        "started_at": now - 1,
        "finished_at": now,
        "metadata": {"k": "v"},
        "run_id": None,
        "document_id": None,
        "sequence": None,
    }
    values.update(fields)
    return RowRecord(**values)


@pytest.fixture
async def writer(service_urls: ServiceUrls) -> AsyncIterator[JobRowWriter]:
    """The worker's row writer on the test database."""
    rows = JobRowWriter(service_urls.database_url)
    yield rows
    await rows.close()


async def test_a_batch_is_written_with_one_statement(
    writer: JobRowWriter, jobs: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(str(query))
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counting)
    run_id = str(uuid.uuid4())
    records = [_record(run_id=run_id, sequence=i, source_text=f"line {i}") for i in range(300)]
    written, existing = await writer.write_rows(records)
    assert written == {r.id for r in records} and existing == []
    assert len(statements) == 1 and "json_to_recordset" in statements[0]

    job = await jobs.get(records[7].id)
    assert job is not None
    assert (job.status, job.text, job.translation, job.run_id, job.sequence) == (
        JobStatus.SUCCEEDED,
        "line 7",
        "Bonjour",
        run_id,
        7,
    )
    assert job.metadata == {"k": "v"} and job.finished_at is not None
    assert abs(job.finished_at.timestamp() - records[7].finished_at) < 1e-3


@pytest.mark.parametrize("final", ["succeeded", "cancelled"])
async def test_a_final_row_is_never_overwritten_and_is_read_back(
    writer: JobRowWriter, jobs: JobStore, final: str
) -> None:
    first = _record(status=final, prompt_tokens=5, output_tokens=6)
    await writer.write_rows([first])
    other = _record()
    again = _record(first.id, status="failed", attempts=2, finished_at=first.finished_at + 60)
    written, existing = await writer.write_rows([again, other])
    assert written == {other.id}
    assert existing == [FinalRow(first.id, final, first.error, pytest.approx(first.finished_at), 5, 6)]
    job = await jobs.get(first.id)
    assert job is not None and job.status == JobStatus(final) and job.attempts == 1


async def test_a_failed_row_is_replaced_keeping_the_highest_attempt_count(writer: JobRowWriter, jobs: JobStore) -> None:
    failed = _record(status="failed", attempts=3)
    await writer.write_rows([failed])
    written, existing = await writer.write_rows([_record(failed.id, attempts=1, translated_text="Salut")])
    assert written == {failed.id} and existing == []
    job = await jobs.get(failed.id)
    assert job is not None
    assert (job.status, job.translation, job.error, job.attempts) == (JobStatus.SUCCEEDED, "Salut", None, 3)


async def test_an_unreachable_server_is_a_typed_error_and_the_writer_reconnects_after_close(
    service_urls: ServiceUrls, writer: JobRowWriter, jobs: JobStore
) -> None:
    nowhere = JobRowWriter("postgresql://dragoman@127.0.0.1:1/nothing")
    with pytest.raises(DatabaseUnavailableError):
        await nowhere.write_rows([_record()])
    await nowhere.close()

    record = _record()
    await writer.write_rows([_record()])
    await writer.close()
    written, _ = await writer.write_rows([record])  # a new connection after close
    assert written == {record.id} and await jobs.get(record.id) is not None


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    "fields",
    [
        {"source_text": "a\x00b"},
        {"metadata": {"a\x00": 1}},
        {"translated_text": "lone \ud800 surrogate"},
        {"metadata": {"k": _deep(5000)}},
        {"sequence": 2**40},
        {"attempts": -(2**40)},
        {"created_at": 1e300},
        {"run_id": "not a uuid"},
    ],
    ids=["nul-text", "nul-key", "surrogate", "too-deep", "sequence", "attempts", "created-at", "run-id"],
)
async def test_a_value_that_cannot_be_stored_is_a_typed_error_and_its_storable_failure_is_written(
    writer: JobRowWriter, jobs: JobStore, fields: dict[str, Any]
) -> None:
    fine, bad = _record(), _record(**fields)
    with pytest.raises(UnstorableRowError):
        await writer.write_rows([fine, bad])
    assert await jobs.get(fine.id) is None  # nothing of the batch was committed
    failure = storable_failure(bad, "could not be stored \x00 here")
    written, _ = await writer.write_rows([fine, failure])  # the connection is still usable
    assert written == {fine.id, bad.id}
    job = await jobs.get(bad.id)
    assert job is not None and job.status is JobStatus.FAILED and job.error == "could not be stored \ufffd here"
    assert job.translation is None and job.source_lang == "en"


def test_a_storable_failure_keeps_the_jobs_controls_for_its_retry() -> None:
    controls = {"glossary": {"cat": "chat"}, "formality": "formal"}
    assert storable_failure(_record(controls=controls), "failed").controls == controls
    assert storable_failure(_record(controls=controls), "failed", bare=True).controls is None


async def test_an_unknown_job_has_no_row(jobs: JobStore) -> None:
    assert await jobs.get(str(uuid.uuid4())) is None
