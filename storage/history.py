"""A tenant's history: its stand-alone jobs, runs and documents, newest first, a page at a time (the web console).

Pages are keyset pages over ``(created_at, id)``, read backwards by the indexes of migration 0019
(``jobs_standalone_tenant_created``, ``runs_tenant_created``, ``documents_tenant_created``): a page
costs its rows whatever the history's length, and rows added meanwhile shift nothing. The cursor
(:class:`PageCursor`) is the last row's ``created_at`` in whole microseconds (what PostgreSQL keeps)
and its id; callers see it as an opaque string (:func:`encode_cursor`).

Also here: what a retry reads back, a stand-alone job's row with its controls and a document's
stored source and options, always scoped to the tenant.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from contract.errors import DragomanError
from contract.progress import GroupProgress
from contract.schemas import Job
from storage.connection import AsyncConnectionPool
from storage.jobs import JOB_COLUMNS, row_to_job
from storage.partitions import day_bounds
from storage.runs import FLAG_COUNTS_SQL, KINDS, group_progress

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
MAX_CURSOR_US = (datetime(9999, 12, 31, tzinfo=UTC) - _EPOCH) // _MICROSECOND
"""The latest ``created_at`` a cursor may name: past it, PostgreSQL's interval overflows (a forged cursor, a 500)."""


class InvalidCursorError(DragomanError):
    """A ``before=`` cursor that no page of this list handed out (edited, truncated or from another list)."""


class PageCursor(NamedTuple):
    """Where a page ends: its last row's ``created_at`` (unix microseconds) and id; the next page starts below."""

    created_us: int
    id: str


def micros(moment: datetime) -> int:
    """``moment`` as whole unix microseconds (exact: PostgreSQL keeps microseconds)."""
    return (moment - _EPOCH) // _MICROSECOND


def encode_cursor(cursor: PageCursor) -> str:
    """The cursor as the opaque URL-safe string a list answers with in ``next``."""
    return base64.urlsafe_b64encode(f"{cursor.created_us}:{cursor.id}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> PageCursor:
    """The cursor of a ``next`` string; :class:`InvalidCursorError` for anything a list did not hand out."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        created, _, ident = raw.partition(":")
        # only plain digits in range: int() also takes "1_000", " 12" and "-5", and PostgreSQL refuses
        # a huge one with "interval out of range" (a 500 rather than the 400 a forged cursor deserves)
        if not (created.isascii() and created.isdigit()) or int(created) > MAX_CURSOR_US:
            raise ValueError(created)
        return PageCursor(int(created), str(uuid.UUID(ident)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursorError(
            f"before={text!r} is not a cursor this list handed out; pass the 'next' of the previous page, or omit it"
        ) from None


_BEFORE = " AND ({t}created_at, {t}id) < (timestamptz 'epoch' + %s * interval '1 microsecond', %s::uuid)"
"""Rows strictly below the cursor (a row comparison: the index's backward scan starts there)."""

STANDALONE_PAGE_SQL = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant = %s AND run_id IS NULL AND document_id IS NULL"
    "{before} ORDER BY created_at DESC, id DESC LIMIT %s"
)
"""A page of the tenant's stand-alone job rows (jobs with a row: finished), by the partial index."""

GROUP_PAGE_SQL = (
    "SELECT g.id, g.status, g.name, extract(epoch FROM g.created_at), extract(epoch FROM g.completed_at), g.error, "
    "g.total, g.created_at{extra} FROM {table} g WHERE g.tenant = %s{before} "
    "ORDER BY g.created_at DESC, g.id DESC LIMIT %s"
)
"""A page of the tenant's runs or documents (``{extra}``: a document's format and detected source language)."""


def group_counts_sql(column: str) -> str:
    """The job rows of several groups by group and status, as :func:`storage.runs.counts_sql` counts one group's."""
    return (
        f"SELECT {column}, status, count(*), extract(epoch FROM min(created_at)), "
        f"extract(epoch FROM max(finished_at)), {FLAG_COUNTS_SQL} "
        f"FROM jobs WHERE {column} = ANY(%s::uuid[]) GROUP BY {column}, status"
    )


RETRY_JOB_SQL = (
    f"SELECT {JOB_COLUMNS}, controls FROM jobs WHERE id = %s AND tenant = %s AND created_day BETWEEN %s AND %s"
)
"""A job row to retry, in its day's partition when its id names the day (``storage.partitions.day_bounds``)."""
RETRY_DOCUMENT_SQL = (
    "SELECT status, format, source_text, source_lang, target_lang, name, callback_url, max_segment_chars, "
    "retranslate, model, controls, failed_segments FROM documents WHERE id = %s AND tenant = %s"
)


class GroupEntry(NamedTuple):
    """One run or document of a history page: its progress, where it sorts, and a document's format."""

    progress: GroupProgress
    created_us: int
    format: str | None


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What a document was submitted with, as a retry submits it again, and how it ended."""

    status: str
    format: str
    source_text: str
    source_lang: str
    target_lang: str
    name: str | None
    callback_url: str | None
    max_segment_chars: int
    retranslate: bool
    model: str | None
    controls: dict[str, Any]
    failed_segments: int


class HistoryStore:
    """The history reads of one tenant at a time, on the API's connection pool."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def _all(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query, params)
            rows: list[tuple[Any, ...]] = await cursor.fetchall()
        return rows

    async def standalone_jobs(self, tenant: str, before: PageCursor | None, count: int) -> list[Job]:
        """Up to ``count`` of the tenant's stand-alone jobs that have a row, newest first, below ``before``."""
        params: tuple[Any, ...]
        if before is None:
            query, params = STANDALONE_PAGE_SQL.format(before=""), (tenant, count)
        else:
            query = STANDALONE_PAGE_SQL.format(before=_BEFORE.format(t=""))
            params = (tenant, before.created_us, before.id, count)
        return [row_to_job(row) for row in await self._all(query, params)]

    async def groups(self, kind: str, tenant: str, before: PageCursor | None, count: int) -> list[GroupEntry]:
        """Up to ``count`` of the tenant's runs or documents (``kind``), newest first, below ``before``, each with
        its progress (the job counts of the whole page in one more statement)."""
        table, column = KINDS[kind]
        extra = ", g.format, g.detected_source_lang" if kind == "document" else ""
        params: tuple[Any, ...]
        if before is None:
            query, params = GROUP_PAGE_SQL.format(extra=extra, table=table, before=""), (tenant, count)
        else:
            query = GROUP_PAGE_SQL.format(extra=extra, table=table, before=_BEFORE.format(t="g."))
            params = (tenant, before.created_us, before.id, count)
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query, params)
            rows = await cursor.fetchall()
            if not rows:
                return []
            cursor = await conn.execute(group_counts_sql(column), ([row[0] for row in rows],))
            counted = await cursor.fetchall()
        by_group: dict[str, list[tuple[Any, ...]]] = {}
        for count_row in counted:
            by_group.setdefault(str(count_row[0]), []).append(tuple(count_row[1:]))
        return [
            GroupEntry(
                group_progress(
                    kind, tuple(row[:7]), by_group.get(str(row[0]), []), row[9] if kind == "document" else None
                ),
                micros(row[7]),
                str(row[8]) if kind == "document" else None,
            )
            for row in rows
        ]

    async def job_to_retry(self, tenant: str, job_id: str) -> tuple[Job, dict[str, Any]] | None:
        """The tenant's job row and its controls (``{}``: none), or ``None`` (no row, or another tenant's)."""
        rows = await self._all(RETRY_JOB_SQL, (job_id, tenant, *day_bounds(job_id)))
        if not rows:
            return None
        *columns, controls = rows[0]
        return row_to_job(tuple(columns)), dict(controls or {})

    async def document_to_retry(self, tenant: str, document_id: str) -> StoredDocument | None:
        """The tenant's document as it was submitted and how it ended, or ``None`` (unknown, or another tenant's)."""
        rows = await self._all(RETRY_DOCUMENT_SQL, (document_id, tenant))
        if not rows:
            return None
        row = rows[0]
        failed = row[11] if isinstance(row[11], list) else json.loads(row[11] or "[]")
        return StoredDocument(
            status=str(row[0]),
            format=str(row[1]),
            source_text=row[2],
            source_lang=row[3],
            target_lang=row[4],
            name=row[5],
            callback_url=row[6],
            max_segment_chars=int(row[7]),
            retranslate=bool(row[8]),
            model=row[9],
            controls=dict(row[10] or {}),
            failed_segments=len(failed),
        )
