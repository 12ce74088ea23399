"""The RQ tasks: split a document into jobs, finish a run or document exactly once, deliver a webhook.

Each task is idempotent: RQ may run it twice (a retry, a duplicate completion entry) and the
outcome is the same; the database row decides whether there is anything left to do. RQ calls a
synchronous function in a work-horse process; each one runs its coroutine with ``run_sync``
(the stores and the client are the asyncio ones everything else uses). The names RQ calls them
by are ``contract.orchestration``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
import redis
from rq import Retry
from rq.job import Job as RqJob

from broker.group_records import forget_group
from broker.queued_limit import CLAIM_CHUNK, QueuedJobLimit, Reservation, TooManyQueuedJobsError
from broker.redis_client import open_redis
from contract.controls import AUTO_LANGUAGE
from contract.errors import DragomanError, InvalidJobError
from contract.ids import job_id_for
from contract.job_controls import segment_context
from contract.language_detection import LanguageDetector
from contract.orchestration import UNCAPPED_RETRIES, WEBHOOK
from contract.schemas import build_job_spec, validate_text
from contract.sync_bridge import run_sync
from orchestrator.background import OUTAGES
from orchestrator.context import TaskContext
from orchestrator.segmenting.preceding import preceding_text
from orchestrator.segmenting.report import DocumentReport
from orchestrator.segmenting.skeleton import Segment, Skeleton
from orchestrator.segmenting.split import finish_document
from orchestrator.segmenting.split import split_document as split_source
from orchestrator.source_language import detect_document_language
from orchestrator.webhooks import WebhookDeliveryError, post_signed
from producer.async_client import AsyncClient
from storage import GroupStore
from storage.runs import HeldDocument, LockedDocument

log = logging.getLogger(__name__)
_EXCERPT = 60  # characters of a segment's source quoted where it failed the document

_DETECTOR = LanguageDetector()
"""Detects the language of ``source_lang="auto"`` documents (its model loaded once per process, in a thread)."""


class GroupNotCompleteError(DragomanError):
    """A finish was asked for while some of the group's rows are missing; RQ retries it."""


def split_document(document_id: str) -> int | Retry:
    """Cut the stored document into segments and submit one job per segment; return how many.

    A document sent with ``source_lang="auto"`` has its language detected from its segments' text
    here (recorded on the document; its segments are queued with it). Whatever goes wrong fails the
    document with the reason (an unsplittable document, a language that cannot be told, a bug in a
    splitter), so it never stays ``splitting``; only an outage of Redis or PostgreSQL is raised,
    for RQ to retry (without a cap) once the server is back.

    **Its tenant's limit.** A tenant's document (one with ``max_queued_jobs``, its API key's limit of
    unfinished jobs) reserves every segment against that limit before any is queued, atomically
    (``broker/queued_limit.py``: concurrent splits and submissions of the tenant never pass it together).
    One with more segments than the limit can never fit: it fails, saying so. One that does not fit
    yet is **held**: its skeleton is kept (so it is not split again), it stays ``splitting`` (shown as
    ``held``), and the task asks RQ to run it again in ``DRAGOMAN_DOCUMENT_HOLD_SECONDS`` (an ``rq.Retry``
    returned, not an error: no traceback); each try first checks cheaply, without the document's text,
    whether the segments fit now.
    """
    return run_sync(_split_document(TaskContext.from_environment(), document_id))


class DocumentOverQueuedLimitError(DragomanError):
    """The document has more segments than its API key may ever have unfinished: it can never be queued whole."""


async def _split_document(ctx: TaskContext, document_id: str) -> int | Retry:
    held = False
    async with ctx.group_store() as store:
        waiting = await store.held_document(document_id)
        if waiting is not None and not waiting.cancel_requested and not await _fits(ctx, waiting):
            return _hold(ctx)  # still no room: nothing read but the row's counts
        async with store.locked_document(document_id) as document:
            if document is None or document.status != "splitting":
                return 0  # unknown, or already split by an earlier run of this task
            if document.cancel_requested:  # cancelled before it was split (or while held): nothing is submitted
                await store.cancel_unsplit_document(document_id)
                return 0
            try:
                async with store.savepoint():  # a failure here leaves the transaction usable for fail_document
                    if document.skeleton is not None:  # split before, then held for room under its limit
                        skeleton = Skeleton.from_json(document.skeleton)
                    else:
                        skeleton = split_source(
                            document.source_text,
                            document.format,
                            document.max_segment_chars,
                            max_document_chars=ctx.settings.max_document_chars,
                            max_segments=ctx.settings.max_document_segments,
                            retranslate=document.retranslate,
                            max_unpacked_bytes=ctx.settings.max_document_unpacked_bytes,
                            target_lang=document.target_lang,
                        )
                    segments = skeleton.segments
                    if document.skeleton is None:
                        await store.save_skeleton(document_id, skeleton.to_json(), len(segments))
                    if not segments:  # nothing to translate: the document is its own translation
                        await _assemble(store, document_id)
                    else:
                        source_lang = document.source_lang
                        if source_lang == AUTO_LANGUAGE:
                            source_lang = document.detected_source_lang or await detect_document_language(
                                segments, _DETECTOR
                            )
                            await store.record_detected_language(document_id, source_lang)
                        if await _submit_segments(ctx, document_id, segments, document, source_lang):
                            await store.document_running(document_id)
                        else:
                            held = True  # the skeleton (and a detected language) are committed with the row
            except Exception as exc:
                if isinstance(exc, OUTAGES) or isinstance(exc.__cause__, OUTAGES):
                    raise  # Redis or PostgreSQL away (a submit interrupted by one, too): RQ retries
                if isinstance(exc, DragomanError):  # refused (not a zip, a segment too long, over its limit): one line
                    reason = str(exc)
                    log.warning("document %s failed: %s", document_id, reason)
                else:  # a bug in a splitter: its traceback is what the operator needs
                    reason = f"could not be split: {type(exc).__name__}: {exc}"
                    log.exception("document %s failed: %s", document_id, reason)
                await store.fail_document(document_id, reason)
                return 0
    if held:
        log.info(
            "document %s: %d segments held until they fit under its key's limit of %s unfinished jobs",
            document_id,
            len(segments),
            document.max_queued_jobs,
        )
        return _hold(ctx)
    if not segments and document.callback_url:
        await asyncio.to_thread(ctx.enqueue, WEBHOOK, "document", document_id, tenant=document.tenant)
    log.info("document %s: %d segments submitted", document_id, len(segments))
    return len(segments)


def _hold(ctx: TaskContext) -> Retry:
    """What a held document's split returns: run it again in ``DRAGOMAN_DOCUMENT_HOLD_SECONDS``, for as long as it
    takes (RQ counts these tries apart from the retries of a failure)."""
    return Retry(max=UNCAPPED_RETRIES, interval=ctx.settings.document_hold_seconds)


async def _fits(ctx: TaskContext, held: HeldDocument) -> bool:
    """Whether a held document's segments fit under its tenant's limit now (a check: it reserves nothing)."""
    if held.tenant is None or held.max_queued_jobs is None or held.total > held.max_queued_jobs:
        return True  # no limit, or one it can never fit under: the split itself says which
    client = open_redis(ctx.redis_url)
    try:
        await QueuedJobLimit(client, ctx.keys, ctx.settings.state_ttl_seconds).check(
            held.tenant, held.max_queued_jobs, held.total
        )
    except TooManyQueuedJobsError:
        return False
    finally:
        await client.aclose()
    return True


async def _reserve(
    client: AsyncClient, ctx: TaskContext, document: LockedDocument, segments: int
) -> Reservation | None:
    """The places of the document's ``segments`` jobs under its tenant's limit, or ``None`` while they do not fit.

    Raises :class:`DocumentOverQueuedLimitError` if they never can (more segments than the limit).
    """
    limit = document.max_queued_jobs
    if document.tenant is None or limit is None:
        return Reservation.unlimited()
    if segments > limit:
        raise DocumentOverQueuedLimitError(
            f"the document has {segments:,} segments, over its API key's limit of {limit:,} unfinished jobs, so it "
            "could never be queued whole: split it into smaller documents (or raise max_segment_chars), or ask for "
            "a higher limit (dragoman api-key create --max-queued-jobs)"
        )
    limits = QueuedJobLimit(client.submitter.redis, client.submitter.keys, ctx.settings.state_ttl_seconds)
    try:
        return await limits.reserve(document.tenant, limit, segments)
    except TooManyQueuedJobsError:
        return None


async def _submit_segments(
    ctx: TaskContext, document_id: str, segments: list[Segment], document: LockedDocument, source_lang: str
) -> bool:
    """Queue one job per segment from ``source_lang`` (the document's, or the one detected in it), as the
    document's tenant's (its owner sees them, its limit counts them); ``False`` (nothing queued) while they
    do not all fit under that limit.

    Each carries the text before it as context (``DRAGOMAN_DOCUMENT_CONTEXT_CHARS``), after the
    document's own context if it has one, the document's glossary and formality, and a segment
    with inline markup asks the worker to keep its placeholder tags. Each chunk of jobs is claimed
    from the document's reservation before it is submitted, and what is left of it given back after.
    """
    controls = document.controls or {}
    async with AsyncClient(ctx.settings, redis_url=ctx.redis_url, database_url=ctx.database_url) as client:
        reservation = await _reserve(client, ctx, document, len(segments))
        if reservation is None:
            return False
        try:
            await client.submitter.register_group(document_id, "document", len(segments), tenant=document.tenant)
            specs = [
                msgspec.structs.replace(
                    build_job_spec(
                        job_id_for(document_id, i),
                        _segment_text(i, segment, ctx.settings.max_text_chars),
                        source_lang,
                        document.target_lang,
                        max_chars=ctx.settings.max_text_chars,
                        metadata={"segment": i},
                        model=document.model,
                        glossary=controls.get("glossary"),
                        formality=controls.get("formality"),
                    ),
                    document_id=document_id,
                    sequence=i,
                    tenant=document.tenant,
                    context=segment_context(
                        controls.get("context"), preceding_text(segments, i, ctx.settings.document_context_chars)
                    ),
                    inline_tags=bool(segment.codes),
                )
                for i, segment in enumerate(segments)
            ]
            for start in range(0, len(specs), CLAIM_CHUNK):
                chunk = specs[start : start + CLAIM_CHUNK]
                await reservation.claim([spec.job_id for spec in chunk])
                await client.submitter.submit_specs(chunk, only_new=True)  # a second split adds nothing twice
        finally:
            with contextlib.suppress(Exception):  # a lost release ages out (broker.queued_limit.LEASE_SECONDS)
                await reservation.release()
    return True


def _segment_text(sequence: int, segment: Segment, max_chars: int) -> str:
    """The segment's text for its job; one the job would refuse fails the document naming the segment.

    The reason says which segment and quotes the start of its source, so a user can find it in the
    document (a bare "text is too long" does not say where).
    """
    try:
        return validate_text(segment.text, max_chars)
    except InvalidJobError as exc:
        excerpt = segment.raw if len(segment.raw) <= _EXCERPT else segment.raw[:_EXCERPT] + "…"
        raise type(exc)(f"segment {sequence} ({excerpt!r}): {exc}") from None


def finish_group(kind: str, group_id: str) -> str:
    """Mark a run finished or assemble a document, exactly once; then queue its webhook. Returns the status.

    The group's bookkeeping in Redis (its hash and done-set) is deleted once its row is final.
    """
    return run_sync(_finish_group(TaskContext.from_environment(), kind, group_id))


async def _finish_group(ctx: TaskContext, kind: str, group_id: str) -> str:
    async with ctx.group_store() as store, store.locked_group(kind, group_id) as group:
        if group is None:
            log.warning("finish: no %s %s", kind, group_id)
            return "missing"
        if group.status == "splitting":
            raise GroupNotCompleteError(f"{kind} {group_id} is still being split")
        if group.status not in ("submitting", "running"):
            await _forget_group(ctx, group_id)
            return group.status  # finished before: nothing to do
        finished = await store.count_job_rows(kind, group_id)
        if group.total is None or finished < group.total:
            raise GroupNotCompleteError(f"{kind} {group_id}: {finished} of {group.total} rows; not complete yet")
        status = await store.complete_run(group_id) if kind == "run" else await _assemble(store, group_id)
    log.info("%s %s %s", kind, group_id, status)
    await _forget_group(ctx, group_id)
    if group.callback_url:
        await asyncio.to_thread(ctx.enqueue, WEBHOOK, kind, group_id, tenant=group.tenant)
    return status


async def _forget_group(ctx: TaskContext, group_id: str) -> None:
    """Delete a finished group's hash and done-set on every shard (they expire anyway; this frees them now)."""
    client = open_redis(ctx.redis_url)
    try:
        await forget_group(client, ctx.keys, group_id)
    except redis.RedisError as exc:  # the group is finished; the keys' TTL takes them later
        log.warning("could not delete the bookkeeping of %s: %s", group_id, exc)
    finally:
        await client.aclose()


async def _assemble(store: GroupStore, document_id: str) -> str:
    """Put the document together from its segments' rows (source text where a segment failed), with its report."""
    assembly = await store.assembly_input(document_id)
    skeleton = Skeleton.from_json(assembly.skeleton)
    segments = skeleton.segments
    translations: list[str | None] = [None] * len(segments)
    failed: list[dict[str, Any]] = []
    report = DocumentReport(len(segments))
    for row in assembly.segments:
        segment = segments[row.sequence]
        if row.status == "succeeded":
            translations[row.sequence] = row.translation
            report.add(row.sequence, segment, row.translation, row.inline_tags)
            report.add_flags(row.sequence, segment, row.quality_flags)
        else:
            failed.append({"segment": row.sequence, "status": row.status, "error": row.error, "source": segment.text})
    report.failed = len(failed)
    status = "completed" if not failed else ("cancelled" if assembly.cancel_requested else "failed")
    translated = any(t is not None for t in translations)
    try:
        text = finish_document(
            assembly.format, skeleton.assemble(translations, assembly.target_lang if translated else None)
        )
    except InvalidJobError as exc:  # a translated part that would not open: the source, and the reason
        log.error("document %s: %s", document_id, exc)
        text = finish_document(assembly.format, skeleton.source())
        failed.append({"segment": None, "status": "failed", "error": str(exc), "source": ""})
        status = "failed"
    await store.save_assembly(document_id, text, failed, status, report.to_dict())
    return status


def deliver_webhook(kind: str, group_id: str) -> int:
    """POST the run's or document's final status to its callback URL, signed; raise to be retried."""
    return run_sync(_deliver_webhook(TaskContext.from_environment(), kind, group_id))


async def _deliver_webhook(ctx: TaskContext, kind: str, group_id: str) -> int:
    async with ctx.group_store() as store:
        progress = await store.progress(kind, group_id)
        url = await store.callback_url(kind, group_id)
        assert progress is not None and url and ctx.settings.webhook_secret
        body = {"event": f"{kind}.{progress.status}", kind: progress.to_dict()}
        try:
            status = await asyncio.to_thread(
                post_signed,
                url,
                body,
                ctx.settings.webhook_secret,
                ctx.settings.webhook_timeout_seconds,
                allowed_networks=ctx.settings.webhook_allowed_networks,
            )
            outcome = "delivered"
        except WebhookDeliveryError:
            outcome = "retrying"
            raise
        finally:
            await store.record_webhook_attempt(kind, group_id, outcome)
        return status


def webhook_gave_up(job: RqJob, connection: Any, exc_type: Any, exc_value: Any, traceback: Any) -> None:
    """RQ calls this when a delivery failed; after the last retry the row says so."""
    if job.retries_left:
        return
    kind, group_id = job.args
    run_sync(_webhook_gave_up(TaskContext.from_environment(), kind, group_id))
    log.error("webhook for %s %s failed for good: %s", kind, group_id, exc_value)


async def _webhook_gave_up(ctx: TaskContext, kind: str, group_id: str) -> None:
    async with ctx.group_store() as store:
        await store.webhook_gave_up(kind, group_id)
