"""The ``batches`` table of the OpenAI-compatible Batch API, and the job rows of a batch's run.

A batch is a run with an OpenAI facade: creating one writes a ``batches`` row and a ``runs`` row
(``runs.id`` = ``batches.run_id``), so the run's jobs, counts and completion are the runs
machinery's. The batch's own status (``validating`` ... ``completed``) and its output files are
kept here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

import msgspec
from psycopg.types.json import set_json_loads

from contract.schemas import Job
from storage.connection import AsyncConnectionPool
from storage.jobs import JOB_COLUMNS, row_to_job
from storage.runs import FLAG_COUNTS_SQL, flag_counts

_COLUMNS = (
    "id, tenant, run_id::text, endpoint, input_file_id, completion_window, status, total, completed, failed, "
    "output_file_id, error_file_id, errors, metadata, created_at, expires_at, in_progress_at, finalizing_at, "
    "completed_at, failed_at, expired_at, cancelling_at, cancelled_at, partial_output_file_id, follower, follow_until"
)

FINALIZING_TIMEOUT_SECONDS = 300
"""A batch left ``finalizing`` this long (its server died while writing the output) may be finalized again."""


@dataclass(frozen=True, slots=True)
class BatchRow:
    """One ``batches`` row."""

    id: str
    tenant: str
    run_id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    status: str
    total: int
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None
    errors: list[dict[str, Any]] | None
    metadata: dict[str, str] | None
    created_at: datetime
    expires_at: datetime
    in_progress_at: datetime | None
    finalizing_at: datetime | None
    completed_at: datetime | None
    failed_at: datetime | None
    expired_at: datetime | None
    cancelling_at: datetime | None
    cancelled_at: datetime | None
    partial_output_file_id: str | None
    follower: str | None
    follow_until: datetime | None
    flagged: int | None = None  # not a column: the run's jobs with a quality flag, where a read counted them
    flags: dict[str, int] | None = None  # not a column: those jobs per flag, counted with ``flagged``


class OutputRow(NamedTuple):
    """What a succeeded job's output line is made of, read without the rest of its row.

    A batch's output file is written from these while its jobs finish (100,000 of them for a large
    batch), so the row's source text, timestamps and other columns are not read at all.
    """

    job_id: str
    custom_id: str | None
    metadata_json: str | None  # the job's metadata but its custom_id, as JSON text; None when that is empty
    source_lang: str
    target_lang: str
    translation: str | None
    model: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    finished_at: int | None  # unix seconds
    finish_reason: str | None
    quality_flags_json: str | None = None  # the quality checks' findings as JSON text ("{}": clean); None: unchecked


_OUTPUT_COLUMNS = (
    "id::text, metadata->>'custom_id', "
    "CASE WHEN metadata - 'custom_id' = '{}'::jsonb THEN NULL ELSE (metadata - 'custom_id')::text END, "
    "source_lang, target_lang, translated_text, model, prompt_tokens, output_tokens, "
    "floor(extract(epoch FROM finished_at))::bigint, finish_reason, quality_flags::text"
)


@dataclass(frozen=True, slots=True)
class RunTally:
    """How many of a run's jobs have a row, by final status."""

    succeeded: int
    failed: int
    cancelled: int
    flagged: int = 0
    """Finished jobs whose quality checks found something (raw-prompt lines are never checked)."""
    flags: dict[str, int] = field(default_factory=dict)
    """Flagged jobs per flag (only the flags that occur)."""

    @property
    def finished(self) -> int:
        """Jobs in a final status."""
        return self.succeeded + self.failed + self.cancelled


def _batch(row: tuple[Any, ...]) -> BatchRow:
    return BatchRow(*row)


def _stop(stop: int | None) -> int:
    """A range's end, ``None`` meaning past every line."""
    return 2**31 - 1 if stop is None else stop


class AsyncBatchStore:
    """Asyncio reads and writes of batches (the HTTP API's), scoped to a tenant where a caller looks one up."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def _one(self, sql: str, params: tuple[Any, ...]) -> BatchRow | None:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(sql, params)
            row = await cursor.fetchone()
        return None if row is None else _batch(row)

    async def create(
        self,
        batch_id: str,
        tenant: str,
        run_id: str,
        endpoint: str,
        input_file_id: str,
        completion_window: str,
        window_seconds: int,
        metadata: dict[str, str] | None,
    ) -> BatchRow:
        """Record a new batch, ``validating``."""
        row = await self._one(
            "INSERT INTO batches (id, tenant, run_id, endpoint, input_file_id, completion_window, status, metadata, "
            "expires_at) VALUES (%s, %s, %s, %s, %s, %s, 'validating', %s, now() + make_interval(secs => %s)) "
            f"RETURNING {_COLUMNS}",
            (
                batch_id,
                tenant,
                run_id,
                endpoint,
                input_file_id,
                completion_window,
                None if metadata is None else json.dumps(metadata),
                window_seconds,
            ),
        )
        assert row is not None
        return row

    async def fail_validation(self, batch_id: str, errors: list[dict[str, Any]]) -> BatchRow:
        """The input file has bad lines: the batch is ``failed`` with them, nothing was enqueued."""
        row = await self._one(
            f"UPDATE batches SET status = 'failed', failed_at = now(), errors = %s WHERE id = %s RETURNING {_COLUMNS}",
            (json.dumps(errors), batch_id),
        )
        assert row is not None
        return row

    async def create_run(self, batch_id: str, run_id: str, total: int) -> None:
        """Write the batch's run (``submitting``, ``total`` jobs) and its total before its jobs are enqueued."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO runs (id, status, source_lang, target_lang, total, name) "
                "VALUES (%s, 'submitting', '', '', %s, %s) ON CONFLICT (id) DO NOTHING",
                (run_id, total, f"batch {batch_id}"),
            )
            await conn.execute("UPDATE batches SET total = %s WHERE id = %s", (total, batch_id))

    async def reclaim_validation(self, batch_id: str, older_than_seconds: int) -> BatchRow | None:
        """Take up a batch left ``validating`` longer than ``older_than_seconds`` (its server died creating it).

        The row if this caller took it (its claim renewed), else ``None``: one reader resumes it.
        """
        return await self._one(
            "UPDATE batches SET claimed_at = now() WHERE id = %s AND status = 'validating' "
            f"AND claimed_at < now() - make_interval(secs => %s) RETURNING {_COLUMNS}",
            (batch_id, older_than_seconds),
        )

    async def release_validation(self, batch_id: str) -> None:
        """A server stopping mid-creation gives the batch up: the next read (any server's) resumes it."""
        async with self._pool.connection() as conn:
            await conn.execute(
                "UPDATE batches SET claimed_at = 'epoch' WHERE id = %s AND status = 'validating'", (batch_id,)
            )

    async def started(self, batch_id: str, run_id: str, total: int) -> BatchRow:
        """Every job is enqueued: the run is ``running`` and the batch ``in_progress`` (unless cancelled meanwhile)."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "UPDATE runs SET submitted = %s, submitted_at = now(), "
                "status = CASE WHEN status = 'submitting' THEN 'running' ELSE status END WHERE id = %s",
                (total, run_id),
            )
            cursor = await conn.execute(
                "UPDATE batches SET total = %s, in_progress_at = now(), "
                "status = CASE WHEN status = 'validating' THEN 'in_progress' ELSE status END "
                f"WHERE id = %s RETURNING {_COLUMNS}",
                (total, batch_id),
            )
            row = await cursor.fetchone()
        assert row is not None
        return _batch(row)

    async def get(self, tenant: str, batch_id: str) -> BatchRow | None:
        """The tenant's batch, or ``None`` (unknown, or another tenant's)."""
        return await self._one(f"SELECT {_COLUMNS} FROM batches WHERE id = %s AND tenant = %s", (batch_id, tenant))

    async def list(self, tenant: str, *, after: str | None, limit: int) -> list[BatchRow]:
        """Up to ``limit`` of the tenant's batches, newest first, after the batch ``after``."""
        where, params = "tenant = %s", [tenant]
        if after:
            where += " AND (created_at, id) < (SELECT created_at, id FROM batches WHERE id = %s AND tenant = %s)"
            params += [after, tenant]
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM batches WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %s",
                (*params, limit),
            )
            rows = await cursor.fetchall()
        return [_batch(row) for row in rows]

    async def tally(self, run_id: str) -> RunTally:
        """How many of the run's jobs finished, by status, and how many were flagged (in the same pass)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT status, count(*), {FLAG_COUNTS_SQL} FROM jobs WHERE run_id = %s GROUP BY status", (run_id,)
            )
            rows = await cursor.fetchall()
        counts = {str(row[0]): int(row[1]) for row in rows}
        flagged, flags = flag_counts(rows)
        return RunTally(counts.get("succeeded", 0), counts.get("failed", 0), counts.get("cancelled", 0), flagged, flags)

    async def sequences_with_rows(self, run_id: str) -> frozenset[int]:
        """The line numbers of the run's jobs that have a row (resuming a batch skips them)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute("SELECT sequence FROM jobs WHERE run_id = %s", (run_id,))
            return frozenset(int(row[0]) for row in await cursor.fetchall())

    async def request_cancel(self, tenant: str, batch_id: str) -> BatchRow | None:
        """Mark a ``validating`` or ``in_progress`` batch ``cancelling`` (and its run cancel-requested).

        Returns the batch as it is now (unchanged if it was past cancelling), ``None`` if unknown.
        """
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "UPDATE batches SET status = 'cancelling', cancelling_at = now() "
                "WHERE id = %s AND tenant = %s AND status IN ('validating', 'in_progress') RETURNING run_id",
                (batch_id, tenant),
            )
            row = await cursor.fetchone()
            if row is not None:
                await conn.execute("UPDATE runs SET cancel_requested = true WHERE id = %s", (row[0],))
        return await self.get(tenant, batch_id)

    async def expire(self, batch_id: str) -> BatchRow | None:
        """Note that an ``in_progress`` batch's window ended (once: ``None`` if it was already noted)."""
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "UPDATE batches SET expired_at = now() WHERE id = %s AND status = 'in_progress' AND expired_at IS NULL "
                f"RETURNING {_COLUMNS}",
                (batch_id,),
            )
            row = await cursor.fetchone()
            if row is not None:
                await conn.execute("UPDATE runs SET cancel_requested = true WHERE id = %s", (row[2],))
        return None if row is None else _batch(row)

    async def claim_finalizing(self, batch_id: str, *, follower: str | None = None) -> BatchRow | None:
        """Move a batch whose jobs all finished to ``finalizing``; the row if this caller won it, else ``None``.

        Several API servers may see the batch finished at once: one ``UPDATE`` decides which of them
        writes the output. While a follower's claim holds (:meth:`claim_following`), only that
        follower wins (``follower``). A batch stuck ``finalizing`` (its server died) can be claimed
        again after :data:`FINALIZING_TIMEOUT_SECONDS`.
        """
        if follower is not None:
            return await self._one(
                "UPDATE batches SET status = 'finalizing', finalizing_at = now() WHERE id = %s AND follower = %s "
                f"AND follow_until > now() AND status IN ('in_progress', 'cancelling') RETURNING {_COLUMNS}",
                (batch_id, follower),
            )
        return await self._one(
            "UPDATE batches SET status = 'finalizing', finalizing_at = now() WHERE id = %s AND "
            "((status IN ('in_progress', 'cancelling') AND (follow_until IS NULL OR follow_until < now())) "
            "OR (status = 'finalizing' AND "
            f"finalizing_at < now() - make_interval(secs => %s))) RETURNING {_COLUMNS}",
            (batch_id, FINALIZING_TIMEOUT_SECONDS),
        )

    async def claim_following(self, batch_id: str, follower: str, seconds: float) -> BatchRow | None:
        """Take the writing of an unfinished batch's output for ``seconds`` (renewed by :meth:`renew_following`).

        The row as it was before (its ``partial_output_file_id`` is the abandoned file of a
        follower that lapsed, for the caller to discard) if no other follower's claim holds, else
        ``None``.
        """
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "SELECT partial_output_file_id FROM batches WHERE id = %s FOR UPDATE", (batch_id,)
            )
            before = await cursor.fetchone()
            cursor = await conn.execute(
                "UPDATE batches SET follower = %s, follow_until = now() + make_interval(secs => %s), "
                "partial_output_file_id = NULL WHERE id = %s AND status IN ('in_progress', 'cancelling') "
                f"AND (follow_until IS NULL OR follow_until < now()) RETURNING {_COLUMNS}",
                (follower, seconds, batch_id),
            )
            row = await cursor.fetchone()
        if row is None or before is None:
            return None
        return replace(_batch(row), partial_output_file_id=before[0])

    async def renew_following(
        self, batch_id: str, follower: str, seconds: float, partial_output_file_id: str | None
    ) -> bool:
        """Extend ``follower``'s claim and record the file it is writing; False if the claim was lost
        (it lapsed and another server took it, or the batch is no longer running)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "UPDATE batches SET follow_until = now() + make_interval(secs => %s), partial_output_file_id = %s "
                "WHERE id = %s AND follower = %s AND follow_until > now() AND status IN ('in_progress', 'cancelling')",
                (seconds, partial_output_file_id, batch_id, follower),
            )
            return cursor.rowcount > 0

    async def release_following(self, batch_id: str, follower: str) -> None:
        """A follower stopping gives its claim up at once: the next read takes the work over."""
        async with self._pool.connection() as conn:
            await conn.execute(
                "UPDATE batches SET follow_until = 'epoch' WHERE id = %s AND follower = %s", (batch_id, follower)
            )

    async def finished_prefix(self, run_id: str, start: int, limit: int) -> int:
        """The first line at or after ``start`` whose job has no row yet (at most ``start + limit``): every
        line before it is final, so the output file can be written up to there."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT sequence FROM jobs WHERE run_id = %s AND sequence >= %s ORDER BY sequence LIMIT %s",
                (run_id, start, limit),
            )
            rows = await cursor.fetchall()
        end = start
        for (sequence,) in rows:
            if sequence != end:
                break
            end += 1
        return end

    async def release_finalizing(self, batch_id: str) -> None:
        """A server that could not write the output (stopping, or an error) gives the batch up: the next
        read (any server's) claims it again at once."""
        async with self._pool.connection() as conn:
            await conn.execute(
                "UPDATE batches SET finalizing_at = 'epoch' WHERE id = %s AND status = 'finalizing'", (batch_id,)
            )

    async def finish(
        self,
        batch_id: str,
        *,
        status: str,
        output_file_id: str | None,
        error_file_id: str | None,
        completed: int,
        failed: int,
    ) -> BatchRow:
        """The output is written: the batch is ``completed``, ``cancelled`` or ``expired``, and its run final.

        An expired batch keeps the ``expired_at`` it was given when its window ended.
        """
        stamp = {"completed": "completed_at", "cancelled": "cancelled_at", "expired": "expired_at"}[status]
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                f"UPDATE batches SET status = %s, {stamp} = coalesce({stamp}, now()), output_file_id = %s, "
                "error_file_id = %s, completed = %s, failed = %s, partial_output_file_id = NULL, follow_until = NULL "
                f"WHERE id = %s RETURNING {_COLUMNS}",
                (status, output_file_id, error_file_id, completed, failed, batch_id),
            )
            row = await cursor.fetchone()
            assert row is not None
            await conn.execute(
                "UPDATE runs SET status = %s, completed_at = coalesce(completed_at, now()) "
                "WHERE id = %s AND status IN ('submitting', 'running')",
                ("completed" if status == "completed" else "cancelled", row[2]),
            )
        return _batch(row)

    async def iter_output_rows(
        self, run_id: str, *, start: int = 0, stop: int | None = None
    ) -> AsyncIterator[OutputRow]:
        """The run's succeeded jobs of lines ``start`` to ``stop`` (excluded; all by default) in input order,
        as their output lines need them."""
        query = (
            f"SELECT {_OUTPUT_COLUMNS} FROM jobs WHERE run_id = %s AND status = 'succeeded' "
            "AND sequence >= %s AND sequence < %s ORDER BY sequence"
        )
        async for row in self._paged(f"batch-output-{run_id}", query, (run_id, start, _stop(stop))):
            yield OutputRow(*row)

    async def iter_jobs(
        self, run_id: str, *, succeeded: bool, start: int = 0, stop: int | None = None
    ) -> AsyncIterator[tuple[Job, str | None]]:
        """The run's succeeded jobs (or its others) of lines ``start`` to ``stop`` (excluded; all by default)
        in input order with their finish reasons."""
        chosen = "=" if succeeded else "<>"
        query = (
            f"SELECT {JOB_COLUMNS}, finish_reason FROM jobs WHERE run_id = %s AND status {chosen} 'succeeded' "
            "AND sequence >= %s AND sequence < %s ORDER BY sequence"
        )
        async for row in self._paged(f"batch-jobs-{run_id}", query, (run_id, start, _stop(stop)), json_rows=True):
            yield row_to_job(row[:-1]), row[-1]

    async def _paged(
        self, name: str, query: str, params: tuple[Any, ...], *, json_rows: bool = False
    ) -> AsyncIterator[tuple[Any, ...]]:
        """The rows of ``query`` through a server-side cursor, a page at a time: a batch's 100,000 lines
        are never held at once. ``json_rows``: its JSON columns decoded by msgspec (C, not ``json.loads``)."""
        async with self._pool.connection() as conn, conn.transaction():
            cursor = conn.cursor(name=name)
            if json_rows:
                set_json_loads(msgspec.json.decode, cursor)
            try:
                await cursor.execute(query, params)
                while rows := await cursor.fetchmany(2_000):
                    for row in rows:
                        yield row
            finally:
                await cursor.close()
