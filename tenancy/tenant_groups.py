"""Runs and documents over the HTTP API: what is truly the API's around :class:`producer.groups.Groups`.

The runs and documents themselves (tables, job ids, chunked queueing with checkpoints, cancel,
results, the orchestrator's tasks) are the client's :class:`~producer.groups.Groups`, scoped to
the calling tenant. What the API adds: a run's JSONL arrives as a stream of bytes, is stored in
the file store as it arrives (bounded memory for any size), validated in one streaming pass
(nothing is queued if a line is bad), admitted against the tenant's queued-jobs limit, then
queued. The stored upload is deleted once its jobs are queued: the results are the jobs' rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from broker.queued_limit import QueuedJobLimit
from contract.flag_filter import FlagFilter
from contract.ids import new_job_id
from contract.languages import normalize_language
from contract.progress import GroupProgress
from contract.schemas import JobSpec, normalize_source_language
from producer.duplicates import DuplicateFinder, custom_ids_at
from producer.groups import DocumentNotAssembledError, DocumentResult, Groups, check_callback, storable
from producer.run_files import (
    MAX_REPORTED_ERRORS,
    InvalidRunFileError,
    check_run_errors,
    parse_run_line,
    repeated_id_errors,
)
from storage import RUN_INPUT_PURPOSE, FileStore, LineTooLongError, Quota, numbered_lines
from tenancy.batch_lines import numbered

__all__ = ["RUN_UPLOAD_PURPOSE", "DocumentNotAssembledError", "TenantGroups"]

RUN_UPLOAD_PURPOSE = RUN_INPUT_PURPOSE
"""The file-store purpose of a run's JSONL while it is validated and queued."""


class TenantGroups:
    """One API server's runs and documents; every call names the tenant it acts for."""

    def __init__(self, groups: Groups, files: FileStore, limit: QueuedJobLimit) -> None:
        self._groups = groups
        self._limit = limit
        self._files = files

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
        model: str | None = None,
        size: int | None = None,
    ) -> GroupProgress:
        """Store, validate and queue a JSONL run; its progress once every job is queued.

        ``size``: the body's length, known when the caller spooled it (the API does, so that no
        database connection waits on the client): it is reserved against the tenant's file quota
        (:class:`~storage.FileQuotaExceededError`), and a line over ``DRAGOMAN_MAX_JSONL_LINE_BYTES``
        is refused (``InvalidRunFileError`` naming it) while it is stored, nothing kept.

        ``model``: the served model of lines that name none (None: the deployment's routes
        choose); :class:`~contract.errors.ModelNotFoundError` for one nobody serves (nothing queued).

        Raises :class:`~producer.run_files.InvalidRunFileError` listing the bad lines (nothing
        queued), :class:`~storage.FileTooLargeError` past ``DRAGOMAN_MAX_FILE_BYTES`` and
        :class:`~broker.queued_limit.TooManyQueuedJobsError` if its lines would take the
        tenant past ``max_queued_jobs`` unfinished jobs.
        """
        settings = self._groups.settings
        source = normalize_source_language(source_lang) if source_lang else None  # "auto": each line detects its own
        target = normalize_language(target_lang) if target_lang else None
        check_callback(callback_url, settings)
        label = storable(name, "the run's name") or "run.jsonl"
        try:
            upload = await self._files.create(
                tenant,
                RUN_UPLOAD_PURPOSE,
                label,
                body,
                max_bytes=settings.max_file_bytes,
                quota=None if size is None else Quota(settings.file_quota_bytes, size),
                max_line_bytes=settings.max_jsonl_line_bytes,
            )
        except LineTooLongError as exc:
            raise InvalidRunFileError(str(exc)) from None
        try:
            total, models = await self._validate(upload.id, source, target, model)
            await self._groups.check_models(models)
            run_id = new_job_id()
            # Admitted atomically: the run's jobs hold their places from here, claimed by id as they are queued.
            async with self._limit.reserved(tenant, max_queued_jobs, total) as reservation:
                try:
                    await self._groups.create_run(run_id, source, target, total, label, callback_url, tenant)
                    specs = self._specs(upload.id, source, target, run_id, tenant, model)
                    await self._groups.queue_run_jobs(run_id, reservation.claiming(specs), 0, total)
                except Exception:
                    # The caller gets an error and no run id: nothing of the run may go on running.
                    with contextlib.suppress(Exception):
                        await self._groups.cancel("run", run_id, tenant)
                    raise
        finally:
            await self._files.delete(tenant, upload.id, force=True)
        return await self._groups.progress("run", run_id, tenant)

    async def _validate(
        self, file_id: str, source: str | None, target: str | None, model: str | None
    ) -> tuple[int, set[str]]:
        """Check every line in one streaming pass; the number of jobs and the models the lines name, or
        :class:`InvalidRunFileError`.

        Repeated ``custom_id``s are found in bounded memory (:class:`~producer.duplicates.DuplicateFinder`
        spills sorted digests to disk; its final merge runs in a thread).
        """
        max_chars = self._groups.settings.max_text_chars
        placeholder = str(uuid.UUID(int=0))
        errors: list[tuple[int, str]] = []
        count = 0
        models: set[str] = set()
        with DuplicateFinder() as ids:
            async for number, raw in numbered_lines(self._files, file_id):
                try:
                    spec = parse_run_line(
                        number, _text(number, raw), source, target, max_chars, placeholder, model=model
                    )
                    ids.add(str(spec.metadata["custom_id"]), number)
                    if spec.model is not None:
                        models.add(spec.model)
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
        return count, models

    async def _specs(
        self, file_id: str, source: str | None, target: str | None, run_id: str, tenant: str, model: str | None
    ) -> AsyncIterator[JobSpec]:
        """The stored upload's lines as the run's jobs, numbered, as the tenant's."""
        max_chars = self._groups.settings.max_text_chars
        sequence = 0
        async for number, raw in numbered_lines(self._files, file_id):
            spec = parse_run_line(number, _text(number, raw), source, target, max_chars, run_id, model=model)
            yield numbered(spec, run_id, sequence, tenant)
            sequence += 1

    async def progress(self, tenant: str, kind: str, group_id: str) -> GroupProgress:
        """The tenant's run or document as it stands; :class:`JobNotFoundError` if unknown or another tenant's."""
        return await self._groups.progress(kind, group_id, tenant)

    async def iter_results(
        self, tenant: str, run_id: str, *, allow_partial: bool = False, flagged: FlagFilter = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's results in input order (``flagged``: only flagged jobs' lines);
        :class:`RunNotFinishedError` while jobs are pending (unless allowed)."""
        return await self._groups.results(run_id, allow_partial=allow_partial, tenant=tenant, flagged=flagged)

    async def cancel(self, tenant: str, kind: str, group_id: str) -> GroupProgress:
        """Cancel every unfinished job of the tenant's run or document; its progress."""
        return await self._groups.cancel(kind, group_id, tenant)

    # Documents -------------------------------------------------------------------------------

    async def submit_document(
        self,
        tenant: str,
        text: str,
        fmt: str,
        *,
        source_lang: str | None,
        target_lang: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int | None,
        max_queued_jobs: int,
        retranslate: bool = False,
        model: str | None = None,
        glossary: dict[str, str] | None = None,
        context: str | None = None,
        formality: str | None = None,
    ) -> str:
        """Store the document and ask the orchestrator to split and queue it; its id (``model``: its segments'
        served model, None: the routes choose). ``glossary``, ``context`` and ``formality`` are given to
        every segment job (checked here, before anything is stored).

        Its number of jobs is known only once it is split, so here it is refused (``TooManyQueuedJobsError``)
        only when the tenant is at ``max_queued_jobs`` already; the limit is kept with it, and its split reserves
        every segment against it before queueing any (it is ``held`` until they fit, and fails if they never can).
        """

        async def admit() -> None:
            await self._limit.check(tenant, max_queued_jobs, 1)

        return await self._groups.submit_document(
            text,
            fmt,
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            max_segment_chars=max_segment_chars,
            retranslate=retranslate,
            tenant=tenant,
            admit=admit,
            model=model,
            glossary=glossary,
            context=context,
            formality=formality,
            max_queued_jobs=max_queued_jobs,
        )

    async def document_result(self, tenant: str, document_id: str) -> tuple[str, DocumentResult]:
        """``(format, assembled document)``; :class:`RunNotFinishedError` until it is assembled."""
        result = await self._groups.document_result(document_id, tenant)
        return result.format, result

    async def document_characters(self, tenant: str, document_id: str) -> int:
        """The source characters of the tenant's document's segments, once translated (DeepL's billed characters)."""
        return await self._groups.document_characters(document_id, tenant)


def _text(number: int, raw: bytes) -> str:
    """Line ``number`` as text; :class:`InvalidRunFileError` if it is not UTF-8."""
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise InvalidRunFileError(f"line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
