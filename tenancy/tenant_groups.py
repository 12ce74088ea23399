"""Runs and documents over the HTTP API: uploaded, followed, collected and cancelled by one tenant.

The same runs and documents as :class:`producer.Client`'s (the same tables, job ids, scripts and
orchestrator tasks), on asyncio: a run's JSONL arrives as a stream of bytes, is stored in the
file store as it arrives (bounded memory for any size), validated in one streaming pass
(nothing is queued if a line is bad), then queued in chunks with a checkpoint after each. The
stored upload is deleted once its jobs are queued: the results are the jobs' rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from broker.scripts import CancelOutcome
from contract.documents import FINISH_TASK, SPLIT_TASK
from contract.errors import DragomanError, JobNotFoundError, RunNotFinishedError
from contract.ids import job_id_for
from contract.languages import normalize_language
from contract.progress import GroupProgress
from contract.schemas import JobSpec
from producer.duplicates import DuplicateFinder, custom_ids_at
from producer.groups import (
    DocumentResult,
    check_callback,
    check_document,
    enqueue_orchestration,
    group_uuid,
    storable,
)
from producer.run_files import (
    MAX_REPORTED_ERRORS,
    InvalidRunFileError,
    check_run_errors,
    parse_run_line,
    repeated_id_errors,
)
from producer.submitter import AsyncJobSubmitter
from storage import AsyncGroupStore, FileStore, numbered_lines
from tenancy.batch_lines import numbered
from tenancy.queued_limit import QueuedJobLimit

RUN_UPLOAD_PURPOSE = "run_input"


class DocumentNotAssembledError(DragomanError):
    """The document failed (it could not be split) or was cancelled before it was assembled: there is no translation."""


"""The file-store purpose of a run's JSONL while it is validated and queued."""


class TenantGroups:
    """One API server's runs and documents; every call names the tenant it acts for."""

    def __init__(
        self,
        submitter: AsyncJobSubmitter,
        files: FileStore,
        store: AsyncGroupStore,
        limit: QueuedJobLimit,
        redis_url: str,
    ) -> None:
        self._submitter = submitter
        self._limit = limit
        self._files = files
        self._store = store
        self._redis_url = redis_url

    # Runs ------------------------------------------------------------------------------------

    async def submit_run(
        self,
        tenant: str,
        body: AsyncIterator[bytes],
        *,
        source_lang: str | None,
        target_lang: str | None,
        name: str | None,
        callback_url: str | None,
        max_queued_jobs: int,
    ) -> GroupProgress:
        """Store, validate and queue a JSONL run; its progress once every job is queued.

        Raises :class:`~producer.run_files.InvalidRunFileError` listing the bad lines (nothing
        queued), :class:`~storage.FileTooLargeError` past ``DRAGOMAN_MAX_FILE_BYTES`` and
        :class:`~tenancy.queued_limit.TooManyQueuedJobsError` if its lines would take the
        tenant past ``max_queued_jobs`` unfinished jobs.
        """
        settings = self._submitter.settings
        source = normalize_language(source_lang) if source_lang else None
        target = normalize_language(target_lang) if target_lang else None
        check_callback(callback_url, settings)
        label = storable(name, "the run's name") or "run.jsonl"
        upload = await self._files.create(tenant, RUN_UPLOAD_PURPOSE, label, body, max_bytes=settings.max_file_bytes)
        try:
            total = await self._validate(upload.id, source, target)
            await self._limit.admit(tenant, max_queued_jobs, total)
            run_id = str(uuid.uuid4())
            await self._store.create_run(tenant, run_id, source, target, total, label, callback_url)
            try:
                await self._submitter.register_group(run_id, "run", total)
                await self._queue(upload.id, source, target, run_id, tenant)
            except Exception:
                # The caller gets an error and no run id: nothing of the run may go on running.
                with contextlib.suppress(Exception):
                    await self.cancel(tenant, "run", run_id)
                raise
        finally:
            await self._files.delete(tenant, upload.id)
        return await self.progress(tenant, "run", run_id)

    async def _validate(self, file_id: str, source: str | None, target: str | None) -> int:
        """Check every line in one streaming pass; the number of jobs, or :class:`InvalidRunFileError`.

        Repeated ``custom_id``s are found in bounded memory (:class:`~producer.duplicates.DuplicateFinder`
        spills sorted digests to disk; its final merge runs in a thread).
        """
        max_chars = self._submitter.settings.max_text_chars
        placeholder = str(uuid.UUID(int=0))
        errors: list[tuple[int, str]] = []
        count = 0
        with DuplicateFinder() as ids:
            async for number, raw in numbered_lines(self._files, file_id):
                try:
                    spec = parse_run_line(number, _text(number, raw), source, target, max_chars, placeholder)
                    ids.add(str(spec.metadata["custom_id"]), number)
                except InvalidRunFileError as exc:
                    errors.append((number, str(exc)))
                    if len(errors) >= MAX_REPORTED_ERRORS:
                        break
                count += 1
            room = MAX_REPORTED_ERRORS - len(errors)
            repeated, _ = await asyncio.to_thread(ids.duplicates_counted, room) if room > 0 else ([], 0)
        errors += repeated_id_errors(
            repeated, await custom_ids_at(numbered_lines(self._files, file_id), {f for _, f in repeated})
        )
        check_run_errors(errors, count)
        return count

    async def _queue(self, file_id: str, source: str | None, target: str | None, run_id: str, tenant: str) -> None:
        """Queue the run's jobs in chunks, checkpointing after each; stop if the run is cancelled meanwhile."""
        settings = self._submitter.settings

        async def specs() -> AsyncIterator[JobSpec]:
            sequence = 0
            async for number, raw in numbered_lines(self._files, file_id):
                spec = parse_run_line(number, _text(number, raw), source, target, settings.max_text_chars, run_id)
                yield numbered(spec, run_id, sequence, tenant)
                sequence += 1

        submitted = 0
        chunk: list[tuple[JobSpec, str | None]] = []
        async for spec in specs():
            chunk.append((spec, None))
            if len(chunk) >= settings.submit_chunk_size:
                await self._submitter.write(chunk)
                submitted += len(chunk)
                if await self._store.run_submitted(run_id, submitted, done=False):
                    await self._submitter.cancel_many([spec.job_id for spec, _ in chunk])
                    return
                chunk = []
        await self._submitter.write(chunk)
        if await self._store.run_submitted(run_id, submitted + len(chunk), done=True):
            await self._submitter.cancel_many([spec.job_id for spec, _ in chunk])  # cancelled meanwhile

    async def progress(self, tenant: str, kind: str, group_id: str) -> GroupProgress:
        """The tenant's run or document as it stands; :class:`JobNotFoundError` if unknown or another tenant's."""
        found = await self._store.progress(tenant, kind, group_uuid(group_id, kind))
        if found is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        return found

    async def iter_results(
        self, tenant: str, run_id: str, *, allow_partial: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's results in input order; :class:`RunNotFinishedError` while jobs are pending (unless allowed).

        Checked before the first line is produced, so a caller can answer the error instead.
        """
        status = await self.progress(tenant, "run", run_id)
        if status.counts.pending and not allow_partial:
            raise RunNotFinishedError(
                f"run {status.id} is {status.counts.percent:.1f}% done ({status.counts.pending} jobs pending); "
                "wait for it, or ask for partial results with ?partial=true"
            )
        return self._store.iter_results(status.id)

    async def cancel(self, tenant: str, kind: str, group_id: str) -> GroupProgress:
        """Cancel every unfinished job of the tenant's run or document; its progress."""
        group_id = group_uuid(group_id, kind)
        total = await self._store.request_cancel(tenant, kind, group_id)
        if total is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        job_ids = [job_id_for(group_id, sequence) for sequence in range(total)]
        outcomes = await self._submitter.cancel_many(job_ids)
        current = await self.progress(tenant, kind, group_id)
        if kind == "run" and current.status == "submitting":
            # Its submission stopped half-way (a server died): the jobs never queued get a cancelled row.
            missing = [n for n, outcome in enumerate(outcomes) if outcome is CancelOutcome.MISSING]
            await self._store.cancel_unsubmitted_jobs(group_id, missing, [job_ids[n] for n in missing])
            await self._orchestrate(FINISH_TASK, kind, group_id, job_id=f"finish-{kind}-{group_id}")
            current = await self.progress(tenant, kind, group_id)
        return current

    # Documents -------------------------------------------------------------------------------

    async def submit_document(
        self,
        tenant: str,
        text: str,
        fmt: str,
        *,
        source_lang: str,
        target_lang: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int | None,
        max_queued_jobs: int,
        retranslate: bool = False,
    ) -> str:
        """Store the document and ask the orchestrator to split and queue it; its id.

        Its number of jobs is known only once it is split, so it is refused (``TooManyQueuedJobsError``)
        only when the tenant is at ``max_queued_jobs`` already.
        """
        settings = self._submitter.settings
        limit = check_document(text, fmt, settings, max_segment_chars)
        check_callback(callback_url, settings)
        await self._limit.admit(tenant, max_queued_jobs, 1)
        source, target = normalize_language(source_lang), normalize_language(target_lang)
        document_id = str(uuid.uuid4())
        label = storable(name, "the document's name")
        await self._store.create_document(
            tenant, document_id, fmt, text, source, target, label, callback_url, limit, retranslate
        )
        await self._orchestrate(SPLIT_TASK, document_id, job_id=f"split-{document_id}")
        return document_id

    async def document_result(self, tenant: str, document_id: str) -> tuple[str, DocumentResult]:
        """``(format, assembled document)``; :class:`RunNotFinishedError` until it is assembled."""
        found = await self._store.document_output(tenant, group_uuid(document_id, "document"))
        if found is None:
            raise JobNotFoundError(f"no document with id {document_id}")
        status, fmt, text, failed, report = found
        if text is None and status in ("failed", "cancelled"):
            raise DocumentNotAssembledError(f"document {document_id} is {status}; it has no translation")
        if text is None:
            raise RunNotFinishedError(f"document {document_id} is {status}; it has not been assembled yet")
        return fmt, DocumentResult(status=status, text=text, failed_segments=failed, report=report)

    async def _orchestrate(self, task: str, *args: Any, job_id: str) -> None:
        """Queue an orchestrator task (RQ is synchronous: in a thread, off the event loop)."""
        queue = self._submitter.keys.orchestration_queue
        await asyncio.to_thread(enqueue_orchestration, self._redis_url, queue, task, *args, job_id=job_id)


def _text(number: int, raw: bytes) -> str:
    """Line ``number`` as text; :class:`InvalidRunFileError` if it is not UTF-8."""
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise InvalidRunFileError(f"line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
