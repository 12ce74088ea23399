"""The ``jobs`` table: the client's reads of finished jobs and the worker's batched upsert of them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import msgspec

from contract.schemas import Job, JobStatus
from storage.connection import AsyncPostgresConnection, DatabaseUnavailableError, PostgresConnection

JOB_COLUMNS = (
    "id, status, source_lang, target_lang, source_text, translated_text, error, attempts, model, "
    "prompt_tokens, output_tokens, created_at, started_at, finished_at, metadata, run_id, "
    "document_id, sequence"
)

# One statement per batch: the rows travel as one JSON array of objects (encoded in C by
# msgspec, parsed once by PostgreSQL), one row per job comes back; timestamps are unix seconds.
UPSERT_SQL = """
INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error,
                  attempts, model, prompt_tokens, output_tokens, created_at, started_at,
                  finished_at, metadata, run_id, document_id, sequence)
SELECT u.id, u.status, u.source_lang, u.target_lang, u.source_text, u.translated_text, u.error,
       u.attempts, u.model, u.prompt_tokens, u.output_tokens, to_timestamp(u.created_at),
       to_timestamp(u.started_at), to_timestamp(u.finished_at), u.metadata, u.run_id,
       u.document_id, u.sequence
FROM json_to_recordset(%s::json)
     AS u(id uuid, status text, source_lang text, target_lang text, source_text text,
          translated_text text, error text, attempts int, model text, prompt_tokens int,
          output_tokens int, created_at float8, started_at float8, finished_at float8,
          metadata jsonb, run_id uuid, document_id uuid, sequence int)
ON CONFLICT (id) DO UPDATE SET
    status = EXCLUDED.status,
    translated_text = EXCLUDED.translated_text,
    error = EXCLUDED.error,
    attempts = GREATEST(jobs.attempts, EXCLUDED.attempts),
    model = EXCLUDED.model,
    prompt_tokens = EXCLUDED.prompt_tokens,
    output_tokens = EXCLUDED.output_tokens,
    started_at = EXCLUDED.started_at,
    finished_at = EXCLUDED.finished_at
WHERE jobs.status NOT IN ('succeeded', 'cancelled')
RETURNING id::text
"""

# Rows the upsert left alone (already final): their events must say what the row says.
EXISTING_SQL = """
SELECT id::text, status, error, extract(epoch FROM finished_at), prompt_tokens, output_tokens
FROM jobs WHERE id = ANY(%s::uuid[])
"""


class RowRecord(msgspec.Struct):
    """One ``jobs`` row as the upsert reads it (the field names are the recordset's columns)."""

    id: str
    status: str
    source_lang: str
    target_lang: str
    source_text: str
    translated_text: str | None
    error: str | None
    attempts: int
    model: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    created_at: float
    started_at: float | None
    finished_at: float
    metadata: dict[str, Any]
    run_id: str | None
    document_id: str | None
    sequence: int | None


class FinalRow(NamedTuple):
    """A row the upsert did not touch because it was already final, as the completion event needs it."""

    id: str
    status: str
    error: str | None
    finished_at: float | None
    prompt_tokens: int | None
    output_tokens: int | None


class JobRows(Protocol):
    """What the worker's writer needs of the ``jobs`` table: one batch in, one transaction."""

    async def write_batch(self, records: Sequence[RowRecord]) -> tuple[set[str], list[FinalRow]]:
        """Upsert ``records``; return the ids written and the final rows that were left alone."""
        ...

    async def close(self) -> None:
        """Drop the connection (the next batch opens a new one)."""
        ...


_encode_rows = msgspec.json.Encoder().encode


class JobRowWriter:
    """The worker's writes of finished jobs: one upsert statement per batch, on one async connection.

    A succeeded or cancelled row is never overwritten (a duplicate delivery is absorbed); such rows
    are read back in the same transaction so that their completion events say what the row says.
    """

    def __init__(self, database_url: str) -> None:
        self._connection = AsyncPostgresConnection(database_url)

    async def write_batch(self, records: Sequence[RowRecord]) -> tuple[set[str], list[FinalRow]]:
        """Upsert ``records`` in one transaction; return the ids written and the final rows left alone.

        Raises :class:`DatabaseUnavailableError` when PostgreSQL cannot be reached (nothing was
        committed then; the caller retries the same batch).
        """
        import psycopg
        from psycopg.types.json import Json

        try:
            conn = await self._connection.get()
            async with conn.transaction():
                # Json with msgspec's encoder: its bytes go to the server as they are (no str round trip).
                cursor = await conn.execute(UPSERT_SQL, (Json(records, dumps=_encode_rows),), binary=True)
                written = {row[0] for row in await cursor.fetchall()}
                skipped = [record.id for record in records if record.id not in written]
                existing = []
                if skipped:
                    cursor = await conn.execute(EXISTING_SQL, (skipped,))
                    existing = await cursor.fetchall()
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError.from_driver(exc) from exc
        return written, [_final_row(*row) for row in existing]

    async def close(self) -> None:
        """Close the connection (after an outage, or when the writer stops)."""
        await self._connection.close()


def _final_row(
    job_id: str, status: str, error: str | None, finished: Any, prompt_tokens: int | None, output_tokens: int | None
) -> FinalRow:
    return FinalRow(job_id, status, error, None if finished is None else float(finished), prompt_tokens, output_tokens)


def row_to_job(row: tuple[Any, ...]) -> Job:
    """Build the public :class:`Job` view from a ``SELECT {JOB_COLUMNS}`` row."""
    (
        job_id,
        status,
        source,
        target,
        text,
        translation,
        error,
        attempts,
        model,
        prompt_tokens,
        output_tokens,
        created,
        started,
        finished,
        metadata,
        run_id,
        document_id,
        sequence,
    ) = row
    return Job(
        id=str(job_id),
        status=JobStatus(status),
        source_lang=source,
        target_lang=target,
        text=text,
        translation=translation,
        error=error,
        attempts=attempts,
        model=model,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        created_at=created,
        started_at=started,
        finished_at=finished,
        metadata=metadata or {},
        run_id=_str_or_none(run_id),
        document_id=_str_or_none(document_id),
        sequence=sequence,
    )


def _str_or_none(value: uuid.UUID | str | None) -> str | None:
    return None if value is None else str(value)


class JobStore:
    """Synchronous reads of finished jobs for the producer's :class:`~producer.Client`."""

    def __init__(self, connection: PostgresConnection) -> None:
        self._connection = connection

    def get(self, job_id: str) -> Job | None:
        """The job's final row, or ``None`` if it has none (yet)."""
        row = self._connection.get().execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %s", (job_id,)).fetchone()
        return None if row is None else row_to_job(row)
