"""PostgreSQL rows of runs and documents, and the job counts that make up their progress."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from contract.progress import GroupProgress, RunCounts, progress
from storage.database import PostgresConnection

KINDS = {"run": ("runs", "run_id"), "document": ("documents", "document_id")}

_PROGRESS_SQL = """
SELECT g.id, g.status, g.name, extract(epoch FROM g.created_at), extract(epoch FROM g.completed_at), g.error,
       g.total
FROM {table} g WHERE g.id = %s
"""
_COUNTS_SQL = """
SELECT status, count(*), extract(epoch FROM min(created_at)), extract(epoch FROM max(finished_at))
FROM jobs WHERE {column} = %s GROUP BY status
"""


class GroupStore:
    """Synchronous reads and writes of ``runs`` and ``documents`` (the producer side)."""

    def __init__(self, connection: PostgresConnection) -> None:
        self._postgres = connection

    def connection(self) -> Any:
        """The shared (lazily opened, autocommit) psycopg connection."""
        return self._postgres.get()

    def create_run(
        self,
        run_id: str,
        source: str | None,
        target: str | None,
        total: int,
        name: str | None,
        callback_url: str | None,
    ) -> None:
        """Record a run about to be submitted."""
        self.connection().execute(
            "INSERT INTO runs (id, status, source_lang, target_lang, total, name, callback_url) "
            "VALUES (%s, 'submitting', %s, %s, %s, %s, %s)",
            (run_id, source or "", target or "", total, name, callback_url),
        )

    def run_submitted(self, run_id: str, submitted: int, *, done: bool) -> None:
        """Note how many of the run's jobs are in the queue (and when the last one went in)."""
        self.connection().execute(
            "UPDATE runs SET submitted = %s, status = CASE WHEN %s AND status = 'submitting' THEN 'running' "
            "ELSE status END, submitted_at = CASE WHEN %s THEN now() ELSE submitted_at END WHERE id = %s",
            (submitted, done, done, run_id),
        )

    def create_document(
        self,
        document_id: str,
        fmt: str,
        source_text: str,
        source: str,
        target: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int,
    ) -> None:
        """Record a document waiting to be split."""
        self.connection().execute(
            "INSERT INTO documents (id, status, format, source_text, source_lang, target_lang, name, callback_url, "
            "max_segment_chars) VALUES (%s, 'splitting', %s, %s, %s, %s, %s, %s, %s)",
            (document_id, fmt, source_text, source, target, name, callback_url, max_segment_chars),
        )

    def request_cancel(self, kind: str, group_id: str) -> int | None:
        """Mark a run or document cancelled-on-request; return its number of jobs (``None`` if unknown)."""
        table, _ = KINDS[kind]
        row = (
            self.connection()
            .execute(
                f"UPDATE {table} SET cancel_requested = true WHERE id = %s RETURNING coalesce(total, 0)", (group_id,)
            )
            .fetchone()
        )
        return None if row is None else int(row[0])

    def progress(self, kind: str, group_id: str) -> GroupProgress | None:
        """Status, counts, rate and time left of a run or document (``None`` if there is no such id)."""
        table, column = KINDS[kind]
        conn = self.connection()
        row = conn.execute(_PROGRESS_SQL.format(table=table), (group_id,)).fetchone()
        if row is None:
            return None
        by_status: dict[str, int] = {}
        first: float | None = None
        last: float | None = None
        for status, count, created, finished in conn.execute(_COUNTS_SQL.format(column=column), (group_id,)):
            by_status[status] = int(count)
            first = float(created) if first is None else min(first, float(created))
            if finished is not None:
                last = float(finished) if last is None else max(last, float(finished))
        counts = RunCounts(
            total=int(row[6] or 0),
            succeeded=by_status.get("succeeded", 0),
            failed=by_status.get("failed", 0),
            cancelled=by_status.get("cancelled", 0),
        )
        return progress(kind, row[:6], counts, first, last)

    def iter_results(self, run_id: str) -> Iterator[dict[str, Any]]:
        """One dict per job of the run in input order, read with a server-side cursor (bounded memory)."""
        conn = self.connection()
        with conn.transaction(), conn.cursor(name=f"run-results-{run_id}") as cursor:
            cursor.itersize = 2_000
            cursor.execute(
                "SELECT sequence, metadata->>'custom_id', status, translated_text, error, metadata "
                "FROM jobs WHERE run_id = %s ORDER BY sequence",
                (run_id,),
            )
            for _, custom_id, status, translation, error, metadata in cursor:
                line: dict[str, Any] = {"custom_id": custom_id, "status": status}
                if status == "succeeded":
                    line["translation"] = translation
                else:
                    line["error"] = error or status
                extra = {k: v for k, v in (metadata or {}).items() if k != "custom_id"}
                if extra:
                    line["metadata"] = extra
                yield line

    def document_output(self, document_id: str) -> tuple[str, str | None, list[dict[str, Any]]] | None:
        """``(status, assembled text, failed segments)`` of a document, ``None`` if unknown."""
        row = (
            self.connection()
            .execute("SELECT status, output_text, failed_segments FROM documents WHERE id = %s", (document_id,))
            .fetchone()
        )
        if row is None:
            return None
        failed = row[2] if isinstance(row[2], list) else json.loads(row[2] or "[]")
        return str(row[0]), row[1], failed
