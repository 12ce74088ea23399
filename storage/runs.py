"""The ``runs`` and ``documents`` tables, and the job counts and rows that make up their progress and output.

The producer's client and the HTTP API create, follow and cancel runs and documents here (the
API's scoped to a tenant); the orchestrator splits documents, finishes runs and documents under
a row lock, assembles documents and records webhook deliveries here. A "group" is either;
:data:`KINDS` maps each kind to its table and to the ``jobs`` column that points at it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple

from contract.errors import RunFileMismatchError
from contract.flag_filter import FlagFilter, filter_names
from contract.progress import GroupProgress, RunCounts, progress
from contract.quality import FLAG_NAMES
from storage.connection import AsyncConnectionPool

KINDS = {"run": ("runs", "run_id"), "document": ("documents", "document_id")}

PROGRESS_SQL = """
SELECT g.id, g.status, g.name, extract(epoch FROM g.created_at), extract(epoch FROM g.completed_at), g.error,
       g.total, {detected}
FROM {table} g WHERE g.id = %s
"""
DETECTED_SQL = {"run": "NULL", "document": "g.detected_source_lang"}
"""The column of :data:`PROGRESS_SQL` for a group's detected source language (only documents detect theirs)."""
FLAGGED_SQL = "quality_flags <> '{}'::jsonb"
"""A job row whose quality checks found something (``{}``: checked and clean; ``NULL``: not checked, and
``NULL <> ...`` is not true). A literal, not ``jsonb_build_object()``: that one is only stable, so it would
be called again for every row."""
FLAG_COUNTS_SQL = ", ".join(
    [f"count(*) FILTER (WHERE {FLAGGED_SQL})"]
    + [f"count(*) FILTER (WHERE quality_flags ? '{flag}')" for flag in FLAG_NAMES]
)
"""The flagged count and one count per flag, aggregated in the same pass over the rows as the status counts."""


def counts_sql(column: str) -> str:
    """A group's job rows by status (``column``: the ``jobs`` column naming the group), each status with its
    first creation, last finish and :data:`FLAG_COUNTS_SQL`'s counts; the group's id is the one parameter."""
    return (
        "SELECT status, count(*), extract(epoch FROM min(created_at)), extract(epoch FROM max(finished_at)), "
        f"{FLAG_COUNTS_SQL} FROM jobs WHERE {column} = %s GROUP BY status"
    )


def flag_counts(count_rows: Iterable[Sequence[Any]]) -> tuple[int, dict[str, int]]:
    """The flagged jobs and the jobs per flag (only flags that occur), summed over rows ending in
    :data:`FLAG_COUNTS_SQL`'s columns."""
    flagged = 0
    per_flag = dict.fromkeys(FLAG_NAMES, 0)
    width = len(FLAG_NAMES) + 1
    for row in count_rows:
        tail = row[-width:]
        flagged += int(tail[0])
        for name, count in zip(FLAG_NAMES, tail[1:], strict=True):
            per_flag[name] += int(count)
    return flagged, {name: count for name, count in per_flag.items() if count}


def group_progress(
    kind: str, row: tuple[Any, ...], count_rows: Iterable[tuple[Any, ...]], detected_source_lang: str | None = None
) -> GroupProgress:
    """The progress of a group from its :data:`PROGRESS_SQL` row (its first seven columns) and its
    :func:`counts_sql` rows; ``detected_source_lang``: a document's, found when it was split."""
    rows = list(count_rows)
    by_status: dict[str, int] = {}
    first: float | None = None
    last: float | None = None
    for status, count, created, finished, *_ in rows:
        by_status[status] = int(count)
        first = float(created) if first is None else min(first, float(created))
        if finished is not None:
            last = float(finished) if last is None else max(last, float(finished))
    flagged, flags = flag_counts(rows)
    counts = RunCounts(
        total=int(row[6] or 0),
        succeeded=by_status.get("succeeded", 0),
        failed=by_status.get("failed", 0),
        cancelled=by_status.get("cancelled", 0),
        flagged=flagged,
        flags=flags,
    )
    return progress(kind, row[:6], counts, first, last, detected_source_lang)


CREATE_RUN_SQL = (
    "INSERT INTO runs (id, status, source_lang, target_lang, total, name, callback_url, tenant) "
    "VALUES (%s, 'submitting', %s, %s, %s, %s, %s, %s)"
)
CREATE_DOCUMENT_SQL = (
    "INSERT INTO documents (id, status, format, source_text, source_lang, target_lang, name, callback_url, "
    "max_segment_chars, tenant, retranslate, model, controls, max_queued_jobs) "
    "VALUES (%s, 'splitting', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
RUN_SUBMITTED_SQL = (
    "UPDATE runs SET submitted = GREATEST(submitted, %s), status = CASE WHEN %s AND status = "
    "'submitting' THEN 'running' ELSE status END, submitted_at = CASE WHEN %s THEN now() "
    "ELSE submitted_at END WHERE id = %s RETURNING cancel_requested"
)
REQUEST_CANCEL_SQL = "UPDATE {table} SET cancel_requested = true WHERE id = %s RETURNING coalesce(total, 0)"
CANCEL_UNSUBMITTED_SQL = (
    "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, error, created_at, finished_at, "
    "run_id, sequence, created_day) SELECT j.id, 'cancelled', r.source_lang, r.target_lang, '', "
    "'cancelled before it was submitted', now(), now(), r.id, j.sequence, jobs_created_day(j.id, now()) "
    "FROM runs r, unnest(%s::uuid[], %s::int[]) AS j(id, sequence) WHERE r.id = %s "
    "ON CONFLICT (id, created_day) DO NOTHING"
)
RESULTS_PAGE_SQL = (
    "SELECT sequence, metadata->>'custom_id', status, translated_text, error, metadata, quality_flags "
    "FROM jobs WHERE run_id = %s AND sequence > %s{flagged} ORDER BY sequence LIMIT %s"
)
"""One page of a run's job rows in input order, after a sequence number, as :func:`result_line` reads them
(``{flagged}``: empty, or ``AND`` :data:`FLAGGED_SQL` for the flagged rows alone)."""


def result_line(row: tuple[Any, ...]) -> dict[str, Any]:
    """One line of a run's results: ``custom_id``, ``status``, the translation or the error, extra metadata.

    A checked translation carries its ``quality_flags`` (``{}`` when clean); a row never checked
    (failed, cancelled, from before the checks) has no such key.
    """
    _, custom_id, status, translation, error, metadata, quality_flags = row
    line: dict[str, Any] = {"custom_id": custom_id, "status": status}
    if status == "succeeded":
        line["translation"] = translation
    else:
        line["error"] = error or status
    if quality_flags is not None:
        line["quality_flags"] = quality_flags
    extra = {k: v for k, v in (metadata or {}).items() if k != "custom_id"}
    if extra:
        line["metadata"] = extra
    return line


@dataclass(frozen=True, slots=True)
class LockedGroup:
    """What finishing needs of a run or document row, read under the lock of :meth:`GroupStore.locked_group`."""

    status: str
    total: int | None
    callback_url: str | None
    tenant: str | None = None  # the API key's tenant it is (its webhook is delivered in the tenant's turn)


@dataclass(frozen=True, slots=True)
class LockedDocument:
    """A document row as splitting needs it, read under the lock of :meth:`GroupStore.locked_document`."""

    status: str
    format: str
    source_text: str
    source_lang: str
    target_lang: str
    max_segment_chars: int
    callback_url: str | None
    cancel_requested: bool
    tenant: str | None = None  # the API key's tenant that submitted it (its jobs are the tenant's)
    retranslate: bool = False  # translate a catalogue's translated entries too
    model: str | None = None  # the served model its segments go to (None: the deployment's routes choose)
    controls: dict[str, Any] | None = None  # glossary, context, formality for every segment (None: none)
    max_queued_jobs: int | None = None  # the tenant's limit its segments are reserved against (None: no limit)
    skeleton: list[Any] | None = None  # kept by an earlier split that was held for room under that limit
    detected_source_lang: str | None = None  # found by that earlier split (``source_lang`` "auto")


@dataclass(frozen=True, slots=True)
class HeldDocument:
    """What a split needs to tell whether a held document still waits, without its text: read unlocked."""

    tenant: str | None
    max_queued_jobs: int | None
    total: int  # its segments, known since it was split
    cancel_requested: bool


class RunSubmission(NamedTuple):
    """Where an existing run's submission stands: status, the jobs known queued, whether a cancel was asked."""

    status: str
    submitted: int
    cancel_requested: bool


class DocumentOutput(NamedTuple):
    """A document's status, format and what assembly stored: its text (``None`` until assembled), failures, report."""

    status: str
    format: str
    text: str | None
    failed_segments: list[dict[str, Any]]
    report: dict[str, Any] | None


class SegmentRow(NamedTuple):
    """One segment's job row, as assembly reads it."""

    sequence: int
    status: str
    translation: str | None
    error: str | None
    inline_tags: str | None = None  # kept, retried or fallback (a segment sent with placeholder tags)
    quality_flags: dict[str, str] | None = None  # what the quality checks found ({}: clean; None: not checked)


@dataclass(frozen=True, slots=True)
class AssemblyInput:
    """Everything a document is put together from: its skeleton (as stored) and its segments' rows in order."""

    skeleton: Any
    cancel_requested: bool
    segments: list[SegmentRow]
    target_lang: str | None = None
    format: str = "txt"


_TRANSACTION: ContextVar[tuple[GroupStore, Any] | None] = ContextVar("dragoman_group_transaction", default=None)
"""The store and connection of the transaction the current task is inside (see :meth:`GroupStore.locked_group`)."""


def _tenant_clause(tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """The SQL that limits a lookup to ``tenant`` (nothing for ``None``: every tenant) and its parameter."""
    return ("", ()) if tenant is None else (" AND tenant = %s", (tenant,))


class GroupStore:
    """Reads and writes of ``runs`` and ``documents`` on a connection pool (client, HTTP API, orchestrator).

    ``tenant`` (where a method takes it) scopes a lookup to one tenant of the HTTP API: another
    tenant's run or document is ``None``, exactly like an unknown id; ``None`` sees every tenant.
    :meth:`locked_group` and :meth:`locked_document` hold one connection in a transaction, and the
    methods the same task calls inside them join it.
    """

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """The transaction's connection inside :meth:`_transaction`, else one of the pool's for this statement."""
        held = _TRANSACTION.get()
        if held is not None and held[0] is self:
            yield held[1]
            return
        async with self._pool.connection() as conn:
            yield conn

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Any]:
        """A transaction (a savepoint inside another) that this task's statements on this store join."""
        async with self._connection() as conn, conn.transaction():
            token = _TRANSACTION.set((self, conn))
            try:
                yield conn
            finally:
                _TRANSACTION.reset(token)

    async def _one(self, query: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        async with self._connection() as conn:
            cursor = await conn.execute(query, params)
            row: tuple[Any, ...] | None = await cursor.fetchone()
        return row

    async def _all(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._connection() as conn:
            cursor = await conn.execute(query, params)
            rows: list[tuple[Any, ...]] = await cursor.fetchall()
        return rows

    async def _execute(self, query: str, params: tuple[Any, ...]) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(query, params)
        return int(cursor.rowcount)

    # Create, follow, cancel (the client and the HTTP API) ---------------------------------------

    async def create_run(
        self,
        run_id: str,
        source: str | None,
        target: str | None,
        total: int,
        name: str | None,
        callback_url: str | None,
        tenant: str | None = None,
    ) -> None:
        """Record a run about to be submitted (``submitting``), as ``tenant``'s if given."""
        await self._execute(CREATE_RUN_SQL, (run_id, source or "", target or "", total, name, callback_url, tenant))

    async def resume_run(self, run_id: str, total: int) -> RunSubmission | None:
        """Where the submission of an existing run stands (``None`` if there is no such run).

        Raises :class:`~contract.errors.RunFileMismatchError` if the run was created for a different number of jobs.
        """
        row = await self._one("SELECT status, total, submitted, cancel_requested FROM runs WHERE id = %s", (run_id,))
        if row is None:
            return None
        status, known_total, submitted, cancel_requested = row
        if known_total != total:
            raise RunFileMismatchError(
                f"run {run_id} has {known_total:,} jobs but this file has {total:,} lines; "
                "resume a run with the file it was submitted from"
            )
        return RunSubmission(str(status), int(submitted or 0), bool(cancel_requested))

    async def run_submitted(self, run_id: str, submitted: int, *, done: bool) -> bool:
        """Note how many of the run's jobs are in the queue (and when the last one went in).

        ``submitted`` is a checkpoint: every job before it is queued, so a resumed submission
        starts there. Returns whether a cancel was requested meanwhile (the submitter stops).
        """
        row = await self._one(RUN_SUBMITTED_SQL, (submitted, done, done, run_id))
        return bool(row and row[0])

    async def cancel_unsubmitted_jobs(self, run_id: str, sequences: list[int], job_ids: list[str]) -> int:
        """Give the run's jobs that never reached the queue a ``cancelled`` row; return how many were added.

        A cancelled run whose submission stopped half-way finishes this way: every job has a row.
        Jobs that have a row already keep it.
        """
        if not sequences:
            return 0
        return await self._execute(CANCEL_UNSUBMITTED_SQL, (job_ids, sequences, run_id))

    async def create_document(
        self,
        document_id: str,
        fmt: str,
        source_text: str,
        source: str,
        target: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int,
        retranslate: bool = False,
        tenant: str | None = None,
        model: str | None = None,
        controls: dict[str, Any] | None = None,
        max_queued_jobs: int | None = None,
    ) -> None:
        """Record a document waiting to be split, as ``tenant``'s if given, for ``model`` if it names one, with the
        ``controls`` (glossary, context, formality) its segment jobs carry and the tenant's limit of unfinished
        jobs its segments are reserved against when it is split (``max_queued_jobs``; None: none)."""
        await self._execute(
            CREATE_DOCUMENT_SQL,
            (
                document_id,
                fmt,
                source_text,
                source,
                target,
                name,
                callback_url,
                max_segment_chars,
                tenant,
                retranslate,
                model,
                None if controls is None else json.dumps(controls),
                max_queued_jobs,
            ),
        )

    async def request_cancel(self, kind: str, group_id: str, tenant: str | None = None) -> int | None:
        """Mark a run or document cancel-requested; its number of jobs (``None``: unknown or another tenant's)."""
        table, _ = KINDS[kind]
        clause, scope = _tenant_clause(tenant)
        query = REQUEST_CANCEL_SQL.format(table=table).replace(" RETURNING", f"{clause} RETURNING")
        row = await self._one(query, (group_id, *scope))
        return None if row is None else int(row[0])

    async def progress(self, kind: str, group_id: str, tenant: str | None = None) -> GroupProgress | None:
        """Status, counts, rate and time left of a run or document (``None`` if unknown or another tenant's)."""
        table, column = KINDS[kind]
        clause, scope = _tenant_clause(tenant)
        async with self._connection() as conn:
            cursor = await conn.execute(
                PROGRESS_SQL.format(table=table, detected=DETECTED_SQL[kind]) + clause.replace("tenant", "g.tenant"),
                (group_id, *scope),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            counts = await conn.execute(counts_sql(column), (group_id,))
            return group_progress(kind, row[:7], await counts.fetchall(), row[7])

    results_page = 2_000
    """Rows read per query by :meth:`iter_results`."""

    async def iter_results(self, run_id: str, *, flagged: FlagFilter = None) -> AsyncIterator[dict[str, Any]]:
        """The run's result lines in input order, a page per query.

        ``flagged`` (``contract.flag_filter``): ``None`` every line, an empty set the lines of jobs whose
        quality checks found anything, else those with at least one of its flags.
        No connection is held between pages, so a reader going slowly holds none of the pool.
        """
        page = self.results_page
        after = -1
        names = filter_names(flagged)
        chosen: tuple[list[str], ...]
        if names is None:
            query, chosen = RESULTS_PAGE_SQL.format(flagged=""), ()
        elif not names:
            query, chosen = RESULTS_PAGE_SQL.format(flagged=f" AND {FLAGGED_SQL}"), ()
        else:
            query, chosen = RESULTS_PAGE_SQL.format(flagged=" AND quality_flags ?| %s::text[]"), (names,)
        while True:
            rows = await self._all(query, (run_id, after, *chosen, page))
            for row in rows:
                yield result_line(row)
            if len(rows) < page:
                return
            after = int(rows[-1][0])

    async def document_output(self, document_id: str, tenant: str | None = None) -> DocumentOutput | None:
        """The document's status, format and assembled output; ``None`` if unknown or another tenant's."""
        clause, scope = _tenant_clause(tenant)
        row = await self._one(
            "SELECT status, format, output_text, failed_segments, report FROM documents WHERE id = %s" + clause,
            (document_id, *scope),
        )
        if row is None:
            return None
        failed = row[3] if isinstance(row[3], list) else json.loads(row[3] or "[]")
        report = row[4] if isinstance(row[4], dict) or row[4] is None else json.loads(row[4])
        return DocumentOutput(str(row[0]), str(row[1]), row[2], failed, report)

    async def document_characters(self, document_id: str, tenant: str | None = None) -> int | None:
        """The source characters of the document's segment rows (every finished one, as ``usage_daily`` counts
        each job's); ``None`` if the document is unknown or another tenant's. Reads every segment's text: ask once
        the document is done, not at every poll."""
        clause, scope = _tenant_clause(tenant)
        row = await self._one(
            "SELECT (SELECT coalesce(sum(char_length(source_text)), 0) FROM jobs WHERE document_id = d.id) "
            "FROM documents d WHERE d.id = %s" + clause.replace("tenant", "d.tenant"),
            (document_id, *scope),
        )
        return None if row is None else int(row[0])

    # Orchestrator: split a document -----------------------------------------------------------

    @asynccontextmanager
    async def locked_document(self, document_id: str) -> AsyncIterator[LockedDocument | None]:
        """A transaction holding the document's row lock (``FOR UPDATE``): the row, or ``None`` if unknown.

        Committed when the block ends, rolled back if it raises; a second splitter waits for it.
        """
        async with self._transaction():
            row = await self._one(
                "SELECT status, format, source_text, source_lang, target_lang, max_segment_chars, callback_url, "
                "cancel_requested, tenant, retranslate, model, controls, max_queued_jobs, skeleton, "
                "detected_source_lang FROM documents WHERE id = %s FOR UPDATE",
                (document_id,),
            )
            yield None if row is None else LockedDocument(*row)

    async def held_document(self, document_id: str) -> HeldDocument | None:
        """The document if it is held: split, still ``splitting``, waiting for room under its tenant's limit of
        unfinished jobs for its segments (``None``: not held, or unknown). Its text and skeleton are not read."""
        row = await self._one(
            "SELECT tenant, max_queued_jobs, total, cancel_requested FROM documents "
            "WHERE id = %s AND status = 'splitting' AND total > 0",
            (document_id,),
        )
        return None if row is None else HeldDocument(*row)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A savepoint inside :meth:`locked_document`'s transaction: what fails in it is undone alone.

        So a split that fails (even on an error PostgreSQL raised) can still mark its document failed.
        """
        async with self._transaction():
            yield

    async def cancel_unsplit_document(self, document_id: str) -> None:
        """A document cancelled before it was split: final, with no jobs."""
        await self._execute(
            "UPDATE documents SET status = 'cancelled', total = 0, completed_at = now() WHERE id = %s", (document_id,)
        )

    async def fail_document(self, document_id: str, error: str) -> None:
        """A document that cannot be split: final, with the reason."""
        await self._execute(
            "UPDATE documents SET status = 'failed', error = %s, completed_at = now() WHERE id = %s",
            (error, document_id),
        )

    async def save_skeleton(self, document_id: str, skeleton: Any, total: int) -> None:
        """Keep the split document's skeleton (JSON-ready) until assembly, and its number of segments."""
        await self._execute(
            "UPDATE documents SET skeleton = %s, total = %s WHERE id = %s", (json.dumps(skeleton), total, document_id)
        )

    async def record_detected_language(self, document_id: str, language: str) -> None:
        """The language found in a ``source_lang="auto"`` document's text (its segments are queued with it)."""
        await self._execute("UPDATE documents SET detected_source_lang = %s WHERE id = %s", (language, document_id))

    async def document_running(self, document_id: str) -> None:
        """Every segment of the document is in the queue."""
        await self._execute(
            "UPDATE documents SET status = 'running', submitted_at = now() WHERE id = %s", (document_id,)
        )

    # Orchestrator: finish a run or document ---------------------------------------------------

    @asynccontextmanager
    async def locked_group(self, kind: str, group_id: str) -> AsyncIterator[LockedGroup | None]:
        """A transaction holding the run's or document's row lock: the row, or ``None`` if unknown.

        Committed when the block ends, rolled back if it raises; so a group is finished once even
        when two finishers race.
        """
        table, _ = KINDS[kind]
        async with self._transaction():
            row = await self._one(
                f"SELECT status, total, callback_url, tenant FROM {table} WHERE id = %s FOR UPDATE", (group_id,)
            )
            yield None if row is None else LockedGroup(*row)

    async def count_job_rows(self, kind: str, group_id: str) -> int:
        """How many of the group's jobs have a row (that is, reached a final status)."""
        _, column = KINDS[kind]
        row = await self._one(f"SELECT count(*) FROM jobs WHERE {column} = %s", (group_id,))
        assert row is not None
        return int(row[0])

    async def complete_run(self, run_id: str) -> str:
        """Mark the run finished: ``cancelled`` if a cancel was requested, else ``completed``; return which."""
        row = await self._one(
            "UPDATE runs SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'completed' END, "
            "completed_at = now() WHERE id = %s RETURNING status",
            (run_id,),
        )
        assert row is not None
        return str(row[0])

    async def assembly_input(self, document_id: str) -> AssemblyInput:
        """The document's stored skeleton, whether a cancel was requested, and its segments' rows in order."""
        found = await self._one(
            "SELECT skeleton, cancel_requested, target_lang, format FROM documents WHERE id = %s", (document_id,)
        )
        assert found is not None
        skeleton, cancel_requested, target_lang, fmt = found
        rows = await self._all(
            "SELECT sequence, status, translated_text, error, inline_tags, quality_flags FROM jobs "
            "WHERE document_id = %s ORDER BY sequence",
            (document_id,),
        )
        return AssemblyInput(skeleton, bool(cancel_requested), [SegmentRow(*row) for row in rows], target_lang, fmt)

    async def save_assembly(
        self,
        document_id: str,
        output_text: str,
        failed: list[dict[str, Any]],
        status: str,
        report: dict[str, Any] | None = None,
    ) -> None:
        """Store the assembled document, its failed segments, report and final status (counting the assembly)."""
        await self._execute(
            "UPDATE documents SET output_text = %s, failed_segments = %s, report = %s, status = %s, "
            "completed_at = now(), assemblies = assemblies + 1 WHERE id = %s",
            (output_text, json.dumps(failed), None if report is None else json.dumps(report), status, document_id),
        )

    # Orchestrator: the sweeper -----------------------------------------------------------------

    async def finishable_groups(self, limit: int = 1_000) -> list[tuple[str, str, str | None]]:
        """``(kind, id, tenant)`` of runs and documents not yet finished although every one of their jobs has a row.

        What the sweeper hands to the finish task (in the tenant's turn), whatever became of the completion entry.
        """
        found: list[tuple[str, str, str | None]] = []
        for kind, (table, column) in KINDS.items():
            rows = await self._all(
                f"SELECT g.id, g.tenant FROM {table} g WHERE g.status IN ('submitting', 'running') "
                f"AND g.total IS NOT NULL AND (SELECT count(*) FROM jobs j WHERE j.{column} = g.id) >= g.total "
                "LIMIT %s",
                (limit,),
            )
            found.extend((kind, str(row[0]), row[1]) for row in rows)
        return found

    async def stale_splits(self, older_than_seconds: float, limit: int = 1_000) -> list[tuple[str, str | None, bool]]:
        """``(id, tenant, held)`` of documents still ``splitting`` this long after they were stored: their split task
        was lost, or they are held (split, waiting for room under their tenant's limit of unfinished jobs)."""
        rows = await self._all(
            "SELECT id, tenant, coalesce(total, 0) > 0 FROM documents WHERE status = 'splitting' "
            "AND created_at < now() - make_interval(secs => %s) LIMIT %s",
            (older_than_seconds, limit),
        )
        return [(str(row[0]), row[1], bool(row[2])) for row in rows]

    # Orchestrator: webhooks --------------------------------------------------------------------

    async def callback_url(self, kind: str, group_id: str) -> str | None:
        """Where the group's webhook goes (``None`` if it has none or the group is unknown)."""
        table, _ = KINDS[kind]
        row = await self._one(f"SELECT callback_url FROM {table} WHERE id = %s", (group_id,))
        return None if row is None else row[0]

    async def record_webhook_attempt(self, kind: str, group_id: str, outcome: str) -> None:
        """Count one delivery attempt and keep its outcome (``delivered`` or ``retrying``)."""
        table, _ = KINDS[kind]
        await self._execute(
            f"UPDATE {table} SET webhook_status = %s, webhook_attempts = webhook_attempts + 1 WHERE id = %s",
            (outcome, group_id),
        )

    async def webhook_gave_up(self, kind: str, group_id: str) -> None:
        """The last delivery attempt failed: the webhook is ``failed`` for good."""
        table, _ = KINDS[kind]
        await self._execute(f"UPDATE {table} SET webhook_status = 'failed' WHERE id = %s", (group_id,))
