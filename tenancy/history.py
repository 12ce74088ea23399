"""A tenant's history for the web console: its stand-alone jobs, runs and documents a page at a time, and retries.

Runs and documents have their row from the start, so their pages are PostgreSQL's alone
(``storage.history``). A stand-alone job gets its row only when it finishes (the worker's
writer): a page of jobs merges the rows below the cursor with the tenant's unfinished
stand-alone jobs below it, read from Redis (``broker.standalone_jobs``: the submitter notes each
such job; their state records say queued or running). Both sources are read down from the same
``(created_at, id)`` cursor and a page is the newest of their union, so a job that finishes
between two pages keeps its place (its ``created_at`` does not change). A job a Redis outage kept
out of that set shows once it has finished.

A retry submits a failed or cancelled job again as a new one (its text, languages, metadata, model
and controls), or a document that failed, was cancelled or has failed segments as a new document
from its stored source and options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from broker.job_records import read_states
from broker.keys import RedisKeys
from broker.standalone_jobs import unfinished_standalone
from contract.errors import DragomanError, JobNotFoundError
from contract.schemas import Job, JobStatus, TranslationRequest
from contract.state import state_to_job
from producer.groups import group_uuid
from storage.history import GroupEntry, HistoryStore, PageCursor, StoredDocument, micros
from tenancy.tenant_groups import TenantGroups

TIE_ROOM = 64
"""Extra unfinished jobs read past a page, for those created in the cursor's own microsecond."""

RETRY_IDEMPOTENCY_PREFIX = "dragoman-retry:"
"""The idempotency key of a job's retry is this and the job's id: two retries of one job (a double click, two
tabs) queue one new job, and both answer its id; the key is the tenant's, kept ``DRAGOMAN_IDEMPOTENCY_TTL_SECONDS``."""

RETRYABLE_JOB = frozenset({JobStatus.FAILED, JobStatus.CANCELLED})
RETRYABLE_DOCUMENT = frozenset({"failed", "cancelled"})


class NotRetryableError(DragomanError):
    """The job or document is queued, running or succeeded without failures: there is nothing to retry."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a history list, newest first; ``next`` is where the following page starts (``None``: the last)."""

    items: list[Any]
    next: PageCursor | None


class TenantHistory:
    """Reads a tenant's history and builds its retries; every call names the tenant."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys, store: HistoryStore) -> None:
        self._redis = redis_client
        self._keys = keys
        self._store = store

    async def jobs(self, tenant: str, before: PageCursor | None, limit: int) -> Page:
        """A page of the tenant's stand-alone jobs (finished, queued and running), newest first."""
        rows = await self._store.standalone_jobs(tenant, before, limit + 1)
        max_score = None if before is None else (before.created_us + 1) / 1e6
        unfinished = await unfinished_standalone(self._redis, self._keys, tenant, max_score, limit + 1 + TIE_ROOM)
        states = await read_states(self._redis, self._keys, [job_id for job_id, _ in unfinished])
        merged: dict[str, tuple[tuple[int, str], Job]] = {}
        for job in rows:
            merged[job.id] = ((_created_us(job), job.id), job)
        for (job_id, score), state in zip(unfinished, states, strict=True):
            if not state or state.get("tenant") != tenant:
                continue  # expired, or (never) another tenant's
            place = (round(score * 1e6), job_id)
            if before is not None and place >= before:
                continue
            live = state.get("status") in (JobStatus.QUEUED, JobStatus.RUNNING)
            if live or job_id not in merged:  # a final state with no row yet: its row is being written
                merged[job_id] = (place, state_to_job(job_id, state))
        ordered = sorted(merged.values(), key=lambda entry: entry[0], reverse=True)
        page = ordered[:limit]
        more = len(ordered) > limit and bool(page)
        return Page([job for _, job in page], PageCursor(*page[-1][0]) if more else None)

    async def groups(self, kind: str, tenant: str, before: PageCursor | None, limit: int) -> Page:
        """A page of the tenant's runs or documents (``kind``), newest first: :class:`GroupEntry` items."""
        entries: list[GroupEntry] = await self._store.groups(kind, tenant, before, limit + 1)
        page = entries[:limit]
        more = len(entries) > limit
        return Page(page, PageCursor(page[-1].created_us, page[-1].progress.id) if more else None)

    async def job_retry(self, tenant: str, job_id: str, live: Job) -> TranslationRequest:
        """The request that submits the tenant's failed or cancelled job ``job_id`` again (``live``: the job as a
        lookup answers it, already checked to be the tenant's).

        :class:`NotRetryableError` for a queued, running or succeeded job, a run's or document's (retry
        its run or document), or one cancelled while queued that no worker has recorded yet.
        """
        if live.status not in RETRYABLE_JOB:
            raise NotRetryableError(
                f"job {job_id} is {live.status.value}; only a failed or cancelled job can be retried"
            )
        found = await self._store.job_to_retry(tenant, job_id)
        if found is None:  # cancelled while queued: its row is written when a worker reaches its queue entry
            raise NotRetryableError(
                f"job {job_id} is {live.status.value} but not recorded yet: a worker records it when it reaches the "
                "job in its queue; retry then"
            )
        job, controls = found
        if job.document_id is not None:
            raise NotRetryableError(
                f"job {job_id} is a segment of document {job.document_id}; retry the document instead "
                f"(POST /v1/documents/{job.document_id}/retry)"
            )
        if job.run_id is not None:
            raise NotRetryableError(
                f"job {job_id} is a line of run {job.run_id}; a run's jobs are not retried one by one: "
                "submit its failed lines (GET /v1/runs/{id}/results) as a new run"
            )
        if job.status not in RETRYABLE_JOB:
            raise NotRetryableError(
                f"job {job_id} is {job.status.value}; only a failed or cancelled job can be retried"
            )
        return TranslationRequest(
            text=job.text or "",
            source_lang=job.source_lang or "",
            target_lang=job.target_lang or "",
            metadata=job.metadata or None,
            lane=controls.get("lane"),
            glossary=controls.get("glossary"),
            context=controls.get("context"),
            formality=controls.get("formality"),
            memory=bool(controls.get("memory", True)),
            model=job.model,
            source_hints=controls.get("source_hints"),
            idempotency_key=f"{RETRY_IDEMPOTENCY_PREFIX}{job_id}",
        )

    async def retry_document(self, tenant: str, document_id: str, groups: TenantGroups, max_queued_jobs: int) -> str:
        """Submit the tenant's document again from its stored source and options; the new document's id.

        Only a document that failed, was cancelled, or completed with failed segments;
        :class:`NotRetryableError` otherwise, :class:`JobNotFoundError` if unknown or another tenant's.
        """
        stored: StoredDocument | None = await self._store.document_to_retry(tenant, group_uuid(document_id, "document"))
        if stored is None:
            raise JobNotFoundError(f"no document with id {document_id}")
        if stored.status not in RETRYABLE_DOCUMENT and not (stored.status == "completed" and stored.failed_segments):
            raise NotRetryableError(
                f"document {document_id} is {stored.status} with no failed segments; only a failed or cancelled "
                "document, or one with failed segments, can be retried"
            )
        return await groups.submit_document(
            tenant,
            stored.source_text,
            stored.format,
            source_lang=stored.source_lang,
            target_lang=stored.target_lang,
            name=stored.name,
            callback_url=stored.callback_url,
            max_segment_chars=stored.max_segment_chars,
            max_queued_jobs=max_queued_jobs,
            retranslate=stored.retranslate,
            model=stored.model,
            glossary=stored.controls.get("glossary"),
            context=stored.controls.get("context"),
            formality=stored.controls.get("formality"),
        )


def _created_us(job: Job) -> int:
    """Where a job with a row sorts: its ``created_at`` in unix microseconds."""
    return micros(job.created_at) if job.created_at is not None else 0
