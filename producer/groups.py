"""Runs and documents: submitted, followed, cancelled and collected, once, for every front door.

:class:`Groups` is the asyncio core behind :class:`producer.AsyncClient` (and so the synchronous
:class:`producer.Client`) and the HTTP API's tenancy: a ``tenant`` argument scopes a call to one
tenant of the API (its runs and documents are its own; another tenant's are answered as unknown).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from broker.orchestration import enqueue_orchestration, tenant_concurrency
from broker.scripts import CancelOutcome
from contract.controls import AUTO_LANGUAGE
from contract.documents import FORMATS, SUFFIXES, check_zipped_document
from contract.errors import (
    ConfigurationError,
    DocumentTooLargeError,
    DragomanError,
    InvalidJobError,
    JobNotFoundError,
    RunNotFinishedError,
)
from contract.flag_filter import FlagFilter
from contract.ids import canonical_uuid, job_id_for, new_job_id
from contract.job_controls import document_controls
from contract.languages import normalize_language
from contract.model_names import validate_model_name
from contract.orchestration import FINISH, SPLIT, OrchestratorTask
from contract.progress import GroupProgress
from contract.schemas import JobSpec, normalize_source_language
from contract.settings import Settings
from contract.wording import counted
from producer.run_files import number_jobs, read_run_file, validate_run_file
from producer.submitter import JobSubmitter
from storage import GroupStore

ChunkCallback = Callable[[int, int], None]
"""``on_chunk(submitted, total)``: a run's submission progress, after each chunk."""


class DocumentNotAssembledError(DragomanError):
    """The document failed (it could not be split) or was cancelled before it was assembled: there is no translation."""


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """An assembled document: its text (failed segments kept in the source language) and what failed."""

    status: str
    text: str
    failed_segments: list[dict[str, Any]]
    report: dict[str, Any] | None = None
    """Placeholder-tag outcomes: ``with_tags``, ``tags_kept``, ``retried`` (segment numbers),
    ``fell_back`` and ``tags_broken`` (segment and source excerpt), ``failed`` (a count)."""
    format: str = "txt"
    """The document's format (one of ``contract.documents.FORMATS``)."""


def document_format(path: Path, fmt: str | None = None) -> str:
    """The format of a document file: given, or from its suffix."""
    chosen = fmt or SUFFIXES.get(path.suffix.lower())
    if chosen not in FORMATS:
        raise InvalidJobError(
            f"{path}: cannot tell the format from {path.suffix or 'no suffix'!r}; "
            f"use --format with one of {', '.join(FORMATS)}"
        )
    return str(chosen)


class Groups:
    """Runs and documents: submitted through a :class:`JobSubmitter`, followed through a :class:`GroupStore`.

    ``rq_connection`` gives the connection (bytes replies) to RQ's Redis that queues the orchestrator's
    tasks, opened on first use (a producer that only submits jobs needs no RQ server; on a Redis Cluster
    with no ``DRAGOMAN_ORCHESTRATION_REDIS_URL`` it raises ``ConfigurationError``); the owner closes it.
    """

    def __init__(self, submitter: JobSubmitter, store: GroupStore, rq_connection: Callable[[], redis.Redis]) -> None:
        self._submitter = submitter
        self._store = store
        self._rq = rq_connection

    @property
    def settings(self) -> Settings:
        """The settings jobs are validated and submitted with."""
        return self._submitter.settings

    # Runs ------------------------------------------------------------------------------------

    async def submit_run(
        self,
        path: Path,
        *,
        source_lang: str | None,
        target_lang: str | None,
        name: str | None,
        callback_url: str | None,
        on_chunk: ChunkCallback | None = None,
        run_id: str | None = None,
        model: str | None = None,
    ) -> str:
        """Validate the JSONL file, then submit its lines in chunks; return the run id.

        ``source_lang`` ``"auto"``: each line naming no language of its own is a job that detects its language.
        ``model``: the served model of lines that name none (None: the deployment's routes
        choose). A model nobody serves is refused (:class:`~contract.errors.ModelNotFoundError`)
        before anything is written.

        With ``run_id``, submitting is idempotent and resumable: a run not known yet is created
        under that id; a run whose submission stopped half-way (a crash, Redis gone) gets only
        its missing jobs, from its last checkpoint on; a run fully submitted (or cancelled) gets
        nothing more. Job ids derive from the run id and line number, so nothing is queued twice.
        The file is read in a thread, a chunk at a time (the loop is never blocked on it).
        """
        settings = self.settings
        source = normalize_source_language(source_lang) if source_lang else None  # "auto": each line detects its own
        target = normalize_language(target_lang) if target_lang else None
        check_callback(callback_url, settings)
        if model is not None:
            model = validate_model_name(model)
        total, models = await asyncio.to_thread(validate_run_file, path, source, target, settings.max_text_chars, model)
        await self.check_models(models)
        run_id = group_uuid(run_id, "run") if run_id else new_job_id()
        existing = await self._store.resume_run(run_id, total)
        if existing is None:
            label = storable(name, "the run's name") or path.name.encode("utf-8", "replace").decode()
            await self.create_run(run_id, source, target, total, label, callback_url)
            start = 0
        elif existing.status != "submitting" or existing.cancel_requested:
            if on_chunk:
                on_chunk(existing.submitted, total)
            return run_id  # submitted in full before, or cancelled: nothing to add
        else:
            start = existing.submitted
            await self._submitter.register_group(run_id, "run", total)
        lines = number_jobs(
            read_run_file(path, source, target, settings.max_text_chars, run_id, start=start, model=model),
            run_id,
            start=start,
        )
        await self.queue_run_jobs(run_id, _read_in_thread(lines, settings.submit_chunk_size), start, total, on_chunk)
        return run_id

    async def check_models(self, models: Iterable[str]) -> None:
        """Raise :class:`~contract.errors.ModelNotFoundError` unless every one of ``models`` is served."""
        for name in sorted(models):
            await self._submitter.models.resolve(name)

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
        """Record a validated run of ``total`` jobs (``submitting``) and register it for the worker's finish script."""
        await self._store.create_run(run_id, source, target, total, name, callback_url, tenant)
        await self._submitter.register_group(run_id, "run", total, tenant=tenant)

    async def queue_run_jobs(
        self,
        run_id: str,
        specs: AsyncIterator[JobSpec],
        start: int,
        total: int,
        on_chunk: ChunkCallback | None = None,
    ) -> None:
        """Queue the run's jobs (numbered, from number ``start`` on) in chunks, checkpointing after each.

        If the run is cancelled meanwhile, the chunk just queued (which the cancel may have missed)
        is cancelled too and nothing more is queued. Jobs already queued are left as they are.
        """
        chunk_size = self.settings.submit_chunk_size
        submitted = start
        chunk: list[JobSpec] = []

        async def flush(done: bool) -> bool:
            nonlocal submitted
            submitted += await self._submitter.submit_specs(chunk, only_new=True)
            cancelled = await self._store.run_submitted(run_id, submitted, done=done)
            if cancelled:
                await self._submitter.cancel_many([spec.job_id for spec in chunk])
            if on_chunk:
                on_chunk(submitted, total)
            return cancelled

        async for spec in specs:
            chunk.append(spec)
            if len(chunk) >= chunk_size:
                if await flush(done=False):
                    return
                chunk = []
        await flush(done=True)

    async def progress(self, kind: str, group_id: str, tenant: str | None = None) -> GroupProgress:
        """Status and counts of a run or document; :class:`JobNotFoundError` if unknown (or another tenant's)."""
        found = await self._store.progress(kind, group_uuid(group_id, kind), tenant)
        if found is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        return found

    async def results(
        self, run_id: str, *, allow_partial: bool = False, tenant: str | None = None, flagged: FlagFilter = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's results in input order; :class:`RunNotFinishedError` while jobs are pending (unless allowed).
        ``flagged``: only the lines of jobs whose quality checks found something.

        Checked before the first line is produced, so a caller can answer the error instead.
        """
        status = await self.progress("run", run_id, tenant)
        if status.counts.pending and not allow_partial:
            raise RunNotFinishedError(
                f"run {status.id} is {status.counts.percent:.1f}% done "
                f"({counted(status.counts.pending, 'job')} pending); "
                "wait for it, or ask for partial results (allow_partial=True; dragoman run results --partial; "
                "over HTTP ?partial=true)"
            )
        return self._store.iter_results(status.id, flagged=flagged)

    async def cancel(self, kind: str, group_id: str, tenant: str | None = None) -> GroupProgress:
        """Cancel every job of a run or document that has not finished; return its progress.

        A run whose submission stopped half-way (still ``submitting``) is finished too: its jobs
        that never reached the queue get a ``cancelled`` row, and its finish is queued.
        """
        group_id = group_uuid(group_id, kind)
        total = await self._store.request_cancel(kind, group_id, tenant)
        if total is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        job_ids = [job_id_for(group_id, sequence) for sequence in range(total)]
        outcomes = await self._submitter.cancel_many(job_ids)
        current = await self.progress(kind, group_id, tenant)
        if kind == "run" and current.status == "submitting":
            missing = [sequence for sequence, outcome in enumerate(outcomes) if outcome is CancelOutcome.MISSING]
            await self._store.cancel_unsubmitted_jobs(group_id, missing, [job_ids[sequence] for sequence in missing])
            await self._orchestrate(FINISH, kind, group_id, tenant=tenant)
            current = await self.progress(kind, group_id, tenant)
        return current

    # Documents -------------------------------------------------------------------------------

    async def submit_document(
        self,
        text: str,
        fmt: str,
        *,
        source_lang: str | None,
        target_lang: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int | None,
        retranslate: bool = False,
        tenant: str | None = None,
        admit: Callable[[], Awaitable[None]] | None = None,
        model: str | None = None,
        glossary: Mapping[str, str] | None = None,
        context: str | None = None,
        formality: str | None = None,
        max_queued_jobs: int | None = None,
    ) -> str:
        """Store the document and ask the orchestrator (an RQ worker) to split and submit it; its id.

        ``source_lang`` ``"auto"`` (or ``None``) has the orchestrator detect the document's language from its
        text once it is split (:mod:`orchestrator.source_language`): the document keeps ``"auto"``, its progress
        shows ``detected_source_lang``, and its segments are queued with that language.

        ``glossary``, ``context`` and ``formality`` (the job controls, checked as a job's are) go to every
        segment job: the segment's own preceding text is added after ``context``.

        ``model``: the served model of its segments (None: the deployment's routes choose); one
        nobody serves is refused (:class:`~contract.errors.ModelNotFoundError`) before anything is stored.

        ``admit`` (the HTTP API's queued-jobs limit) runs once the document is known to be valid,
        before anything is written; it raises to refuse the document. ``max_queued_jobs`` (the API key's
        limit of ``tenant``'s unfinished jobs) is kept with the document: its segments are reserved against
        it when it is split, and it waits there until all of them fit (``held``; one with more segments than
        the limit fails, saying so). Its split is queued in ``tenant``'s turn.
        """
        limit = check_document(text, fmt, self.settings, max_segment_chars)
        check_callback(callback_url, self.settings)
        controls = document_controls(None if glossary is None else dict(glossary), context, formality)
        if model is not None:
            await self.check_models([validate_model_name(model)])
        if admit is not None:
            await admit()
        source = normalize_source_language(source_lang or AUTO_LANGUAGE)
        target = normalize_language(target_lang)
        self._rq()  # no RQ server configured: refused here, before a document is stored that nothing would split
        document_id = new_job_id()
        label = storable(name, "the document's name")
        await self._store.create_document(
            document_id,
            fmt,
            text,
            source,
            target,
            label,
            callback_url,
            limit,
            retranslate,
            tenant,
            model,
            controls,
            max_queued_jobs=max_queued_jobs if tenant is not None else None,
        )
        await self._orchestrate(SPLIT, document_id, tenant=tenant)
        return document_id

    async def document_result(self, document_id: str, tenant: str | None = None) -> DocumentResult:
        """The assembled document; :class:`RunNotFinishedError` until it is assembled.

        A document that failed to split or was cancelled before assembly has no translation:
        :class:`DocumentNotAssembledError`.
        """
        found = await self._store.document_output(group_uuid(document_id, "document"), tenant)
        if found is None:
            raise JobNotFoundError(f"no document with id {document_id}")
        if found.text is None and found.status in ("failed", "cancelled"):
            raise DocumentNotAssembledError(f"document {document_id} is {found.status}; it has no translation")
        if found.text is None:
            raise RunNotFinishedError(f"document {document_id} is {found.status}; it has not been assembled yet")
        return DocumentResult(found.status, found.text, found.failed_segments, found.report, found.format)

    async def document_characters(self, document_id: str, tenant: str | None = None) -> int:
        """The source characters of the document's translated segments (DeepL's ``billed_characters``);
        :class:`JobNotFoundError` if unknown (or another tenant's)."""
        found = await self._store.document_characters(group_uuid(document_id, "document"), tenant)
        if found is None:
            raise JobNotFoundError(f"no document with id {document_id}")
        return found

    # Shared ----------------------------------------------------------------------------------

    async def _orchestrate(self, task: OrchestratorTask, *args: str, tenant: str | None = None) -> None:
        """Queue an orchestrator task, in ``tenant``'s turn if given (RQ is synchronous: in a thread, off the
        event loop)."""
        await asyncio.to_thread(
            enqueue_orchestration,
            self._rq(),
            self._submitter.keys,
            task,
            *args,
            tenant=tenant,
            tenant_concurrency=tenant_concurrency(self.settings, task),
        )


async def _read_in_thread(items: Iterator[JobSpec], chunk_size: int) -> AsyncIterator[JobSpec]:
    """``items`` (read from a file) as an async iterator, a chunk at a time in a thread."""
    while chunk := await asyncio.to_thread(list, itertools.islice(items, chunk_size)):
        for item in chunk:
            yield item


def check_callback(callback_url: str | None, settings: Settings) -> None:
    """Refuse a callback URL that is not http(s), or that cannot be signed (no webhook secret)."""
    if callback_url is None:
        return
    storable(callback_url, "the callback URL")
    if not callback_url.startswith(("http://", "https://")):
        raise InvalidJobError(f"callback URL must be http:// or https://, got {callback_url!r}")
    if not settings.webhook_secret:
        raise ConfigurationError("a callback URL needs DRAGOMAN_WEBHOOK_SECRET (deliveries are signed with it)")


def check_document(text: str, fmt: str, settings: Settings, max_segment_chars: int | None) -> int:
    """Refuse a document that cannot be translated as given; return its segment length limit.

    Checked before anything is written, by every front door (the client, the CLI, the HTTP API).
    """
    if fmt not in FORMATS:
        raise InvalidJobError(f"unsupported document format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not text.strip():
        raise InvalidJobError("the document is empty; there is nothing to translate")
    if "\x00" in text:
        raise InvalidJobError("the document contains NUL characters; is it a binary file?")
    if len(text) > settings.max_document_chars:
        raise DocumentTooLargeError(
            f"the document has {len(text):,} characters, over the limit of {settings.max_document_chars:,} "
            "(DRAGOMAN_MAX_DOCUMENT_CHARS); split it into smaller documents"
        )
    check_zipped_document(fmt, text)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise InvalidJobError(
                "the document contains a lone surrogate (half of a UTF-16 pair), which cannot be stored"
            ) from None
    limit = max_segment_chars or settings.max_segment_chars
    if not 20 <= limit <= settings.max_text_chars:
        raise InvalidJobError(f"max segment length must be between 20 and {settings.max_text_chars} characters")
    return limit


def storable(value: str | None, what: str) -> str | None:
    """``value`` if PostgreSQL can store it (no NUL, no lone surrogate), else :class:`InvalidJobError`.

    Checked before anything is written, so a run or document is never created half-way.
    """
    if value is None:
        return None
    if "\x00" in value:
        raise InvalidJobError(f"{what} contains a NUL character, which cannot be stored")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise InvalidJobError(f"{what} contains a lone surrogate, which cannot be stored") from None
    return value


def group_uuid(value: str, kind: str) -> str:
    """The canonical form of a run or document id; :class:`JobNotFoundError` if it is not a UUID."""
    canonical = canonical_uuid(value)
    if canonical is None:
        raise JobNotFoundError(f"{value!r} is not a {kind} id (ids are UUIDs)")
    return canonical
