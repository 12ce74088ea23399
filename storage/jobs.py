"""The ``jobs`` table: the client's reads of finished jobs and the worker's upsert of them, a writer batch at a time."""

from __future__ import annotations

import datetime
import functools
import logging
import math
import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import msgspec

from contract.errors import DragomanError
from contract.ids import canonical_uuid
from contract.schemas import LAST_TIMESTAMP, TENANT_PATTERN, Job, JobStatus, validate_metadata
from storage.connection import (
    AsyncConnectionPool,
    AsyncPostgresConnection,
    DatabaseUnavailableError,
)
from storage.partitions import PartitionError, create_partitions, job_day, partition_name

log = logging.getLogger(__name__)

JOB_COLUMNS = (
    "id, status, source_lang, target_lang, source_text, translated_text, error, attempts, model, "
    "prompt_tokens, output_tokens, created_at, started_at, finished_at, metadata, run_id, "
    "document_id, sequence, tenant, finish_reason, pieces, detected_source_lang, glossary_misses, from_memory, "
    "inline_tags, quality_flags"
)

# One statement per writer batch: the rows travel as one JSON array of objects (encoded in C by
# msgspec, parsed once by PostgreSQL), one row per job comes back; timestamps are unix seconds.
# The same statement keeps ``usage_daily`` (usage per tenant, UTC day, model and status) exact: each
# row it writes is added there, and a row it overwrites (a failure retried) is taken out first, as
# the statement's snapshot saw it (``prior``; a data-modifying CTE's own writes are invisible to the
# rest of the statement). A written row is looked up there in its day's partition (a second probe
# of the primary key: ``xmax``, which told an updated row from an inserted one on a plain table, is
# not readable from a partitioned table's RETURNING); a row inserted finds nothing there.
# The usage keys are upserted in key order after every job row is locked,
# so two writers never wait on each other's usage rows in opposite orders.
UPSERT_SQL = """
WITH u AS MATERIALIZED (
    SELECT r.*, jobs_created_day(r.id, to_timestamp(r.created_at)) AS created_day
    FROM json_to_recordset(%s::json)
         AS r(id uuid, status text, source_lang text, target_lang text, source_text text,
              translated_text text, error text, attempts int, model text, prompt_tokens int,
              output_tokens int, created_at float8, started_at float8, finished_at float8,
              metadata jsonb, run_id uuid, document_id uuid, sequence int, tenant text,
              finish_reason text, pieces int, detected_source_lang text, glossary_misses jsonb,
              from_memory boolean, inline_tags text, quality_flags jsonb, controls jsonb)
),
prior AS (
    SELECT j.id, j.created_day, j.tenant, j.model, j.status, j.finished_at, char_length(j.source_text) AS characters,
           j.prompt_tokens, j.output_tokens
    FROM jobs j
    WHERE (j.id, j.created_day) IN (SELECT id, created_day FROM u) AND j.status NOT IN ('succeeded', 'cancelled')
),
written AS (
INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error,
                  attempts, model, prompt_tokens, output_tokens, created_at, started_at,
                  finished_at, metadata, run_id, document_id, sequence, tenant, finish_reason,
                  pieces, detected_source_lang, glossary_misses, from_memory, inline_tags,
                  quality_flags, controls, created_day)
SELECT u.id, u.status, u.source_lang, u.target_lang, u.source_text, u.translated_text, u.error,
       u.attempts, u.model, u.prompt_tokens, u.output_tokens, to_timestamp(u.created_at),
       to_timestamp(u.started_at), to_timestamp(u.finished_at), u.metadata, u.run_id,
       u.document_id, u.sequence, u.tenant, u.finish_reason, u.pieces, u.detected_source_lang,
       u.glossary_misses, coalesce(u.from_memory, false), u.inline_tags, u.quality_flags, u.controls,
       u.created_day
FROM u
ON CONFLICT (id, created_day) DO UPDATE SET
    status = EXCLUDED.status,
    translated_text = EXCLUDED.translated_text,
    error = EXCLUDED.error,
    attempts = GREATEST(jobs.attempts, EXCLUDED.attempts),
    model = EXCLUDED.model,
    prompt_tokens = EXCLUDED.prompt_tokens,
    output_tokens = EXCLUDED.output_tokens,
    started_at = EXCLUDED.started_at,
    finished_at = EXCLUDED.finished_at,
    finish_reason = EXCLUDED.finish_reason,
    pieces = EXCLUDED.pieces,
    detected_source_lang = EXCLUDED.detected_source_lang,
    glossary_misses = EXCLUDED.glossary_misses,
    from_memory = EXCLUDED.from_memory,
    inline_tags = EXCLUDED.inline_tags,
    quality_flags = EXCLUDED.quality_flags
WHERE jobs.status NOT IN ('succeeded', 'cancelled')
RETURNING jobs.id, jobs.tenant, jobs.model, jobs.status, jobs.finished_at,
          char_length(jobs.source_text) AS characters, jobs.prompt_tokens, jobs.output_tokens,
          jobs.created_day
),
counted AS (
    SELECT tenant, model, status, finished_at, characters, prompt_tokens, output_tokens, 1 AS sign FROM written
    UNION ALL
    SELECT tenant, model, status, finished_at, characters, prompt_tokens, output_tokens, -1 FROM prior
    WHERE (id, created_day) IN (SELECT id, created_day FROM written)
),
summed AS (
INSERT INTO usage_daily AS d (tenant, day, model, status, jobs, characters, prompt_tokens, output_tokens)
SELECT coalesce(tenant, ''), (finished_at AT TIME ZONE 'UTC')::date, coalesce(model, ''), status,
       sum(sign), sum(sign * characters), sum(sign * coalesce(prompt_tokens, 0)),
       sum(sign * coalesce(output_tokens, 0))
FROM counted
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
ON CONFLICT (tenant, day, model, status) DO UPDATE SET
    jobs = d.jobs + EXCLUDED.jobs,
    characters = d.characters + EXCLUDED.characters,
    prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
    output_tokens = d.output_tokens + EXCLUDED.output_tokens
)
SELECT id::text FROM written
"""

# Rows the upsert left alone (already final): their events must say what the row says. Each is
# looked up in its day's partition, as the upsert found it.
EXISTING_SQL = """
SELECT j.id::text, j.status, j.error, extract(epoch FROM j.finished_at), j.prompt_tokens, j.output_tokens
FROM jobs j
WHERE (j.id, j.created_day) IN (
    SELECT s.id, jobs_created_day(s.id, to_timestamp(s.created_at))
    FROM unnest(%s::uuid[], %s::float8[]) AS s(id, created_at)
)
"""

# The days of a writer batch's rows, by the partition key's own rule (for a batch PostgreSQL refused
# because a day has no partition yet).
BATCH_DAYS_SQL = """
SELECT DISTINCT jobs_created_day(r.id, to_timestamp(r.created_at))
FROM json_to_recordset(%s::json) AS r(id uuid, created_at float8)
"""


class RowRecord(msgspec.Struct, omit_defaults=True):
    """One ``jobs`` row as the upsert reads it (the field names are the recordset's columns).

    Fields at their defaults are left out of the JSON (the recordset reads a missing key as null):
    most rows carry no tenant, detected language, glossary misses or memory flag, and every byte
    of the batch is parsed by PostgreSQL.
    """

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
    tenant: str | None = None  # the HTTP API's tenant that submitted the job
    finish_reason: str | None = None
    pieces: int | None = None
    detected_source_lang: str | None = None  # for source_lang "auto"
    glossary_misses: list[str] | None = None  # None: the job had no glossary
    from_memory: bool = False
    inline_tags: str | None = None  # a tagged document segment's outcome: kept, retried, fallback
    quality_flags: dict[str, str] | None = None  # None: not checked (contract.quality)
    controls: dict[str, Any] | None = None  # a stand-alone job's options, for its retry (job_controls)


class FinalRow(NamedTuple):
    """A row the upsert did not touch because it was already final, as the completion event needs it."""

    id: str
    status: str
    error: str | None
    finished_at: float | None
    prompt_tokens: int | None
    output_tokens: int | None


class UnstorableRowError(DragomanError):
    """A batch holds a value that cannot be stored (PostgreSQL or the JSON encoder refused it); nothing was committed.

    Retrying the same batch fails the same way: the caller splits it to find the row, and
    stores that row as a failure with :func:`storable_failure`.
    """


class JobRows(Protocol):
    """What the worker's writer needs of the ``jobs`` table: one writer batch in, one transaction."""

    async def write_rows(self, records: Sequence[RowRecord]) -> tuple[set[str], list[FinalRow]]:
        """Upsert ``records``; return the ids written and the final rows that were left alone.

        Raises :class:`UnstorableRowError` for a value that cannot be stored, and
        :class:`DatabaseUnavailableError` when PostgreSQL cannot be reached.
        """
        ...

    async def close(self) -> None:
        """Drop the connection (the next batch opens a new one)."""
        ...


_encode_rows = msgspec.json.Encoder().encode


def _encoded(data: bytes) -> bytes:
    return data


class JobRowWriter:
    """The worker's writes of finished jobs: one upsert statement per writer batch, on one async connection.

    A succeeded or cancelled row is never overwritten (a duplicate delivery is absorbed); such rows
    are read back in the same transaction so that their completion events say what the row says.
    """

    def __init__(self, database_url: str) -> None:
        self._connection = AsyncPostgresConnection(database_url)

    async def write_rows(self, records: Sequence[RowRecord]) -> tuple[set[str], list[FinalRow]]:
        """Upsert ``records`` in one transaction; return the ids written and the final rows left alone.

        Raises :class:`DatabaseUnavailableError` when PostgreSQL cannot be reached (nothing was
        committed then; the caller retries the same batch), and :class:`UnstorableRowError` when
        a value cannot be encoded or PostgreSQL refuses one (nothing was committed either). A row
        whose day has no partition of ``jobs`` yet (the sweeper creates the coming days' ahead)
        has it created, and the batch is written again, once.
        """
        try:
            # msgspec's bytes go to the server as they are (no str round trip).
            payload = _encode_rows(records)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # a lone surrogate, say
            raise UnstorableRowError(f"a row cannot be written as JSON: {exc}") from exc
        try:
            return await self._upsert(payload, records)
        except _MissingPartitionError:
            await self._create_partitions(payload)
        try:
            return await self._upsert(payload, records)
        except _MissingPartitionError as exc:
            raise UnstorableRowError(str(exc)) from exc

    async def _upsert(self, payload: bytes, records: Sequence[RowRecord]) -> tuple[set[str], list[FinalRow]]:
        """One try of :meth:`write_rows`; raises :class:`_MissingPartitionError` for a day with no partition."""
        import psycopg
        from psycopg.types.json import Json

        try:
            conn = await self._connection.get()
            async with conn.transaction():
                cursor = await conn.execute(UPSERT_SQL, (Json(payload, dumps=_encoded),), binary=True)
                written = {row[0] for row in await cursor.fetchall()}
                skipped = [record for record in records if record.id not in written]
                existing = []
                if skipped:
                    cursor = await conn.execute(
                        EXISTING_SQL, ([record.id for record in skipped], [record.created_at for record in skipped])
                    )
                    existing = await cursor.fetchall()
        except psycopg.errors.CheckViolation as exc:
            if _NO_PARTITION in str(exc):
                raise _MissingPartitionError(_driver_message(exc)) from exc
            raise UnstorableRowError(_driver_message(exc)) from exc
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError) as exc:
            raise UnstorableRowError(_driver_message(exc)) from exc
        except psycopg.OperationalError as exc:
            if (exc.sqlstate or "").startswith("54"):  # a program limit (a value too large or too deep)
                raise UnstorableRowError(_driver_message(exc)) from exc
            raise DatabaseUnavailableError.from_driver(exc) from exc
        return written, [_final_row(*row) for row in existing]

    async def _create_partitions(self, payload: bytes) -> None:
        """Create the partitions of the days of ``payload``'s rows that have none (DDL off the hot path)."""
        import psycopg
        from psycopg.types.json import Json

        try:
            conn = await self._connection.get()
            cursor = await conn.execute(BATCH_DAYS_SQL, (Json(payload, dumps=_encoded),), binary=True)
            days = [row[0] for row in await cursor.fetchall()]
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError.from_driver(exc) from exc
        except psycopg.Error as exc:
            raise UnstorableRowError(_driver_message(exc)) from exc
        try:
            created = await create_partitions(conn, days)
        except PartitionError as exc:
            raise UnstorableRowError(str(exc)) from exc
        if created:
            log.warning("jobs: created the partitions %s for a batch's rows", ", ".join(created))

    async def close(self) -> None:
        """Close the connection (after an outage, or when the writer stops)."""
        await self._connection.close()


_NO_PARTITION = "no partition of relation"  # PostgreSQL's message for a row whose day has no partition


class _MissingPartitionError(DragomanError):
    """A row of the batch has a day with no partition of ``jobs`` (nothing was committed)."""


def _driver_message(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_INT_MAX = 2**31 - 1  # the integer columns


def storable_failure(record: RowRecord, error: str, *, bare: bool = False) -> RowRecord:
    """``record`` as a failed row with ``error``, every field made something PostgreSQL stores.

    Text loses NUL and lone surrogates, numbers out of their column's range become null (a
    timestamp: the failure time), metadata that could not be submitted today becomes ``{}``.
    ``bare`` keeps only the id, the error and the times, for a row that still failed.
    """
    finished = _timestamp(record.finished_at) or time.time()
    # created_at names a non-v7 id's partition (storage.partitions): a failure keeps it where it can
    created = _timestamp(record.created_at) or finished
    error = _text(error) or "failed"
    if bare:
        return RowRecord(
            id=record.id,
            status=JobStatus.FAILED.value,
            source_lang="und",
            target_lang="und",
            source_text="",
            translated_text=None,
            error=error,
            attempts=1,
            model=None,
            prompt_tokens=None,
            output_tokens=None,
            created_at=created,
            started_at=None,
            finished_at=finished,
            metadata={},
            run_id=None,
            document_id=None,
            sequence=None,
        )
    try:
        metadata = validate_metadata(record.metadata)
    except DragomanError:
        metadata = {}
    attempts = record.attempts if isinstance(record.attempts, int) and 0 <= record.attempts <= _INT_MAX else 1
    return RowRecord(
        id=record.id,
        status=JobStatus.FAILED.value,
        source_lang=_text(record.source_lang)[:100] or "und",
        target_lang=_text(record.target_lang)[:100] or "und",
        source_text=_text(record.source_text),
        translated_text=None,
        error=error,
        attempts=attempts,
        model=_text(record.model) if record.model is not None else None,
        prompt_tokens=None,
        output_tokens=None,
        created_at=created,
        started_at=_timestamp(record.started_at),
        finished_at=finished,
        metadata=metadata,
        run_id=canonical_uuid(record.run_id),
        document_id=canonical_uuid(record.document_id),
        sequence=record.sequence if isinstance(record.sequence, int) and 0 <= record.sequence <= _INT_MAX else None,
        tenant=record.tenant if isinstance(record.tenant, str) and TENANT_PATTERN.fullmatch(record.tenant) else None,
        finish_reason=_text(record.finish_reason)[:100] or None,
        pieces=record.pieces if isinstance(record.pieces, int) and 0 <= record.pieces <= _INT_MAX else None,
        controls=record.controls if isinstance(record.controls, dict) else None,  # for its retry
    )


def _text(value: object) -> str:
    """``value`` as text PostgreSQL stores: NUL shown as U+FFFD, lone surrogates as '?'."""
    if not isinstance(value, str):
        return ""
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode()


def _timestamp(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= LAST_TIMESTAMP else None


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
        tenant,
        finish_reason,
        pieces,
        detected_source_lang,
        glossary_misses,
        from_memory,
        inline_tags,
        quality_flags,
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
        tenant=tenant,
        finish_reason=finish_reason,
        pieces=pieces,
        detected_source_lang=detected_source_lang,
        glossary_misses=glossary_misses,
        from_memory=bool(from_memory),
        inline_tags=inline_tags,
        quality_flags=quality_flags,
    )


def _str_or_none(value: uuid.UUID | str | None) -> str | None:
    return None if value is None else str(value)


# A lookup by a v7 id names its day, and reads that day's partition by name: PostgreSQL plans it as
# a plain table (one primary key probe). Through the parent (``WHERE id = %s AND created_day = %s``)
# it prunes to the same probe, but planning that statement costs about twice the lookup with 30 days
# kept (bench/RESULTS.md, "Partitioned jobs table"). Any other id (a uuid4 from before migration
# 0022 or from another producer) is looked up through the parent in every partition: one probe each.
_GET_DAY_SQL = f"SELECT {JOB_COLUMNS} FROM {{partition}} WHERE id = %s"
_GET_ANY_DAY_SQL = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %s"


@functools.lru_cache(maxsize=64)
def get_day_sql(day: datetime.date) -> Any:
    """The statement that reads a job row by id from ``day``'s partition (composed, the name quoted)."""
    from psycopg import sql

    return sql.SQL(_GET_DAY_SQL).format(partition=sql.Identifier(partition_name(day)))


_GET_MANY_SQL = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY(%s::uuid[]) AND created_day = ANY(%s::date[])"
_GET_MANY_ANY_DAY_SQL = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY(%s::uuid[])"


class JobStore:
    """Reads of finished jobs for the producer's client, on a connection pool (no blocking call on the loop)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def get(self, job_id: str) -> Job | None:
        """The job's final row, or ``None`` if it has none (yet, or no more: its day was dropped by retention).

        Raises :class:`DatabaseUnavailableError` when PostgreSQL cannot be reached.
        """
        import psycopg

        day = job_day(job_id)
        async with self._pool.connection() as conn:
            if day is None:
                cursor = await conn.execute(_GET_ANY_DAY_SQL, (job_id,))
            else:
                try:
                    cursor = await conn.execute(get_day_sql(day), (job_id,))
                except psycopg.errors.UndefinedTable:  # a day retention dropped, or one that never had rows
                    return None
            row = await cursor.fetchone()
        return None if row is None else row_to_job(row)

    async def get_many(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """The final rows of those of ``job_ids`` that have one, by id (a waiter of many jobs).

        One statement for the v7 ids (pruned to their days' partitions), one more only if some ids
        are not v7. Raises :class:`DatabaseUnavailableError` when PostgreSQL cannot be reached.
        """
        if not job_ids:
            return {}
        dated: list[str] = []
        days: set[datetime.date] = set()
        undated: list[str] = []
        for job_id in job_ids:
            day = job_day(job_id)
            if day is None:
                undated.append(job_id)
            else:
                dated.append(job_id)
                days.add(day)
        rows: list[tuple[Any, ...]] = []
        async with self._pool.connection() as conn:
            if dated:
                cursor = await conn.execute(_GET_MANY_SQL, (dated, sorted(days)))
                rows += await cursor.fetchall()
            if undated:
                cursor = await conn.execute(_GET_MANY_ANY_DAY_SQL, (undated,))
                rows += await cursor.fetchall()
        jobs = (row_to_job(row) for row in rows)
        return {job.id: job for job in jobs}
