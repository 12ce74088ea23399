"""The RQ tasks: split a document into jobs, finish a run or document exactly once, deliver a webhook.

Each task is idempotent: RQ may run it twice (a retry, a duplicate completion entry) and the
outcome is the same; the database row decides whether there is anything left to do.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec
from rq import Callback, Queue, Retry
from rq.job import Job as RqJob

from contract.errors import DragomanError
from contract.ids import job_id_for
from contract.schemas import build_job_spec
from orchestrator.context import TaskContext
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import split_document as split_source
from orchestrator.webhooks import WebhookDeliveryError, post_signed
from producer.client import Client
from storage.database import PostgresConnection
from storage.runs import KINDS, GroupStore

log = logging.getLogger(__name__)

FINISH_TASK = "orchestrator.tasks.finish_group"
WEBHOOK_TASK = "orchestrator.tasks.deliver_webhook"


class GroupNotCompleteError(DragomanError):
    """A finish was asked for while some of the group's rows are missing; RQ retries it."""


def split_document(document_id: str) -> int:
    """Cut the stored document into segments and submit one job per segment; return how many."""
    ctx = TaskContext.from_environment()
    with ctx.postgres() as conn, conn.transaction():
        row = conn.execute(
            "SELECT status, format, source_text, source_lang, target_lang, max_segment_chars, callback_url, "
            "cancel_requested FROM documents WHERE id = %s FOR UPDATE",
            (document_id,),
        ).fetchone()
        if row is None or row[0] != "splitting":
            return 0  # unknown, or already split by an earlier run of this task
        _, fmt, source, source_lang, target_lang, max_chars, callback_url, cancelled = row
        if cancelled:  # cancelled before it was split: nothing is submitted
            conn.execute(
                "UPDATE documents SET status = 'cancelled', total = 0, completed_at = now() WHERE id = %s",
                (document_id,),
            )
            return 0
        try:
            skeleton = split_source(source, fmt, max_chars)
        except DragomanError as exc:
            conn.execute(
                "UPDATE documents SET status = 'failed', error = %s, completed_at = now() WHERE id = %s",
                (str(exc), document_id),
            )
            return 0
        segments = skeleton.segments
        conn.execute(
            "UPDATE documents SET skeleton = %s, total = %s WHERE id = %s",
            (json.dumps(skeleton.to_json()), len(segments), document_id),
        )
        if not segments:  # nothing to translate: the document is its own translation
            _assemble(conn, document_id)
        else:
            _submit_segments(ctx, document_id, segments, source_lang, target_lang)
            conn.execute("UPDATE documents SET status = 'running', submitted_at = now() WHERE id = %s", (document_id,))
    if not segments and callback_url:
        enqueue_webhook(ctx, "document", document_id)
    log.info("document %s: %d segments submitted", document_id, len(segments))
    return len(segments)


def _submit_segments(ctx: TaskContext, document_id: str, segments: list[Any], source: str, target: str) -> None:
    with Client(ctx.settings, redis_url=ctx.redis_url, database_url=ctx.database_url) as client:
        client.submitter.register_group(document_id, "document", len(segments))
        specs = [
            msgspec.structs.replace(
                build_job_spec(
                    job_id_for(document_id, i),
                    segment.text,
                    source,
                    target,
                    max_chars=ctx.settings.max_text_chars,
                    metadata={"segment": i},
                ),
                document_id=document_id,
                sequence=i,
            )
            for i, segment in enumerate(segments)
        ]
        client.submit_specs(specs)


def finish_group(kind: str, group_id: str) -> str:
    """Mark a run finished or assemble a document, exactly once; then queue its webhook. Returns the status."""
    ctx = TaskContext.from_environment()
    with ctx.postgres() as conn, conn.transaction():
        table, column = KINDS[kind]
        row = conn.execute(
            f"SELECT status, total, callback_url FROM {table} WHERE id = %s FOR UPDATE", (group_id,)
        ).fetchone()
        if row is None:
            log.warning("finish: no %s %s", kind, group_id)
            return "missing"
        status, total, callback_url = row
        if status == "splitting":
            raise GroupNotCompleteError(f"{kind} {group_id} is still being split")
        if status not in ("submitting", "running"):
            return str(status)  # finished before: nothing to do
        finished = conn.execute(f"SELECT count(*) FROM jobs WHERE {column} = %s", (group_id,)).fetchone()[0]
        if total is None or finished < total:
            raise GroupNotCompleteError(f"{kind} {group_id}: {finished} of {total} rows; not complete yet")
        if kind == "run":
            status = conn.execute(
                "UPDATE runs SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'completed' END, "
                "completed_at = now() WHERE id = %s RETURNING status",
                (group_id,),
            ).fetchone()[0]
        else:
            status = _assemble(conn, group_id)
    log.info("%s %s %s", kind, group_id, status)
    if callback_url:
        enqueue_webhook(ctx, kind, group_id)
    return str(status)


def _assemble(conn: Any, document_id: str) -> str:
    """Put the document together from its segments' rows (source text where a segment failed)."""
    skeleton_json, cancel_requested = conn.execute(
        "SELECT skeleton, cancel_requested FROM documents WHERE id = %s", (document_id,)
    ).fetchone()
    skeleton = Skeleton.from_json(skeleton_json)
    rows = conn.execute(
        "SELECT sequence, status, translated_text, error FROM jobs WHERE document_id = %s ORDER BY sequence",
        (document_id,),
    ).fetchall()
    translations: list[str | None] = [None] * len(skeleton.segments)
    failed: list[dict[str, Any]] = []
    for sequence, status, translation, error in rows:
        if status == "succeeded":
            translations[sequence] = translation
        else:
            failed.append(
                {"segment": sequence, "status": status, "error": error, "source": skeleton.segments[sequence].text}
            )
    status = "completed" if not failed else ("cancelled" if cancel_requested else "failed")
    conn.execute(
        "UPDATE documents SET output_text = %s, failed_segments = %s, status = %s, completed_at = now(), "
        "assemblies = assemblies + 1 WHERE id = %s",
        (skeleton.assemble(translations), json.dumps(failed), status, document_id),
    )
    return status


def enqueue_finish(ctx: TaskContext, kind: str, group_id: str) -> None:
    """Queue :func:`finish_group` (retried while rows are missing)."""
    Queue(ctx.keys.orchestration_queue, connection=ctx.rq_connection()).enqueue(
        FINISH_TASK, kind, group_id, job_id=f"finish-{kind}-{group_id}", retry=Retry(max=5, interval=[1, 2, 5, 10, 30])
    )


def enqueue_webhook(ctx: TaskContext, kind: str, group_id: str) -> None:
    """Queue the webhook delivery, retried with the configured backoff."""
    intervals = [int(s) for s in ctx.settings.webhook_retry_seconds]
    Queue(ctx.keys.orchestration_queue, connection=ctx.rq_connection()).enqueue(
        WEBHOOK_TASK,
        kind,
        group_id,
        job_id=f"webhook-{kind}-{group_id}",
        retry=Retry(max=len(intervals), interval=intervals) if intervals else None,
        on_failure=Callback(_webhook_gave_up),
    )


def deliver_webhook(kind: str, group_id: str) -> int:
    """POST the run's or document's final status to its callback URL, signed; raise to be retried."""
    ctx = TaskContext.from_environment()
    table, _ = KINDS[kind]
    postgres = PostgresConnection(ctx.database_url)
    store = GroupStore(postgres)
    try:
        progress = store.progress(kind, group_id)
        url = store.connection().execute(f"SELECT callback_url FROM {table} WHERE id = %s", (group_id,)).fetchone()[0]
        assert progress is not None and url and ctx.settings.webhook_secret
        body = {"event": f"{kind}.{progress.status}", kind: progress.to_dict()}
        try:
            status = post_signed(url, body, ctx.settings.webhook_secret, ctx.settings.webhook_timeout_seconds)
            outcome = "delivered"
        except WebhookDeliveryError:
            outcome = "retrying"
            raise
        finally:
            store.connection().execute(
                f"UPDATE {table} SET webhook_status = %s, webhook_attempts = webhook_attempts + 1 WHERE id = %s",
                (outcome, group_id),
            )
        return status
    finally:
        postgres.close()


def _webhook_gave_up(job: RqJob, connection: Any, exc_type: Any, exc_value: Any, traceback: Any) -> None:
    """RQ calls this when a delivery failed; after the last retry the row says so."""
    if job.retries_left:
        return
    kind, group_id = job.args
    ctx = TaskContext.from_environment()
    with ctx.postgres() as conn:
        conn.execute(f"UPDATE {KINDS[kind][0]} SET webhook_status = 'failed' WHERE id = %s", (group_id,))
    log.error("webhook for %s %s failed for good: %s", kind, group_id, exc_value)
