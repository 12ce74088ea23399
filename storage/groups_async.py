"""Asyncio reads and writes of ``runs`` and ``documents`` for the HTTP API, scoped to a tenant.

The same statements as :class:`~storage.runs.GroupStore` (the synchronous client's and the
orchestrator's), on the API's connection pool, with every lookup limited to the caller's tenant:
another tenant's run or document is ``None``, exactly like an unknown id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from contract.progress import GroupProgress
from storage.connection import AsyncConnectionPool
from storage.runs import (
    CANCEL_UNSUBMITTED_SQL,
    COUNTS_SQL,
    CREATE_DOCUMENT_SQL,
    CREATE_RUN_SQL,
    KINDS,
    PROGRESS_SQL,
    REQUEST_CANCEL_SQL,
    RESULTS_PAGE_SQL,
    RUN_SUBMITTED_SQL,
    group_progress,
    result_line,
)


class AsyncGroupStore:
    """A tenant's runs and documents: create, follow, cancel, read results (the HTTP API's)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def create_run(
        self,
        tenant: str,
        run_id: str,
        source: str | None,
        target: str | None,
        total: int,
        name: str | None,
        callback_url: str | None,
    ) -> None:
        """Record a run about to be submitted (``submitting``)."""
        async with self._pool.connection() as conn:
            await conn.execute(CREATE_RUN_SQL, (run_id, source or "", target or "", total, name, callback_url, tenant))

    async def run_submitted(self, run_id: str, submitted: int, *, done: bool) -> bool:
        """Checkpoint the run's submission; whether a cancel was requested meanwhile."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(RUN_SUBMITTED_SQL, (submitted, done, done, run_id))
            row = await cursor.fetchone()
        return bool(row and row[0])

    async def cancel_unsubmitted_jobs(self, run_id: str, sequences: list[int], job_ids: list[str]) -> None:
        """Give the run's jobs that never reached the queue a ``cancelled`` row."""
        if sequences:
            async with self._pool.connection() as conn:
                await conn.execute(CANCEL_UNSUBMITTED_SQL, (job_ids, sequences, run_id))

    async def create_document(
        self,
        tenant: str,
        document_id: str,
        fmt: str,
        text: str,
        source: str,
        target: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int,
        retranslate: bool = False,
    ) -> None:
        """Record a document waiting to be split."""
        async with self._pool.connection() as conn:
            await conn.execute(
                CREATE_DOCUMENT_SQL,
                (document_id, fmt, text, source, target, name, callback_url, max_segment_chars, tenant, retranslate),
            )

    async def progress(self, tenant: str, kind: str, group_id: str) -> GroupProgress | None:
        """The tenant's run or document as it stands, ``None`` if unknown (or another tenant's)."""
        table, column = KINDS[kind]
        async with self._pool.connection() as conn:
            cursor = await conn.execute(PROGRESS_SQL.format(table=table) + " AND g.tenant = %s", (group_id, tenant))
            row = await cursor.fetchone()
            if row is None:
                return None
            counts = await conn.execute(COUNTS_SQL.format(column=column), (group_id,))
            return group_progress(kind, row, await counts.fetchall())

    async def request_cancel(self, tenant: str, kind: str, group_id: str) -> int | None:
        """Mark the tenant's run or document cancel-requested; its number of jobs (``None`` if unknown)."""
        table, _ = KINDS[kind]
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                REQUEST_CANCEL_SQL.format(table=table).replace(" RETURNING", " AND tenant = %s RETURNING"),
                (group_id, tenant),
            )
            row = await cursor.fetchone()
        return None if row is None else int(row[0])

    results_page = 2_000
    """Rows read per query by :meth:`iter_results`."""

    async def iter_results(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """The run's result lines in input order, a page per query.

        No connection is held between pages, so a client reading slowly holds none of the pool.
        """
        page = self.results_page
        after = -1
        while True:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(RESULTS_PAGE_SQL, (run_id, after, page))
                rows = await cursor.fetchall()
            for row in rows:
                yield result_line(row)
            if len(rows) < page:
                return
            after = int(rows[-1][0])

    async def document_output(
        self, tenant: str, document_id: str
    ) -> tuple[str, str, str | None, list[Any], dict[str, Any] | None] | None:
        """``(status, format, assembled text, failed segments, report)`` of the document; ``None``: unknown."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT status, format, output_text, failed_segments, report FROM documents "
                "WHERE id = %s AND tenant = %s",
                (document_id, tenant),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        failed = row[3] if isinstance(row[3], list) else json.loads(row[3] or "[]")
        report = row[4] if isinstance(row[4], dict) or row[4] is None else json.loads(row[4])
        return str(row[0]), str(row[1]), row[2], failed, report
