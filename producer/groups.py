"""Submitting, following, cancelling and collecting runs and documents (behind :class:`producer.Client`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from broker.scripts import CancelOutcome
from contract.backoff import retry_intervals
from contract.documents import (
    FINISH_TASK,
    FORMATS,
    RETRY_MAX_SECONDS,
    SPLIT_TASK,
    SPLIT_TIMEOUT_SECONDS,
    SUFFIXES,
    UNCAPPED_RETRIES,
)
from contract.errors import (
    ConfigurationError,
    DocumentTooLargeError,
    InvalidJobError,
    JobNotFoundError,
    RunNotFinishedError,
)
from contract.ids import canonical_uuid, job_id_for
from contract.languages import normalize_language
from contract.progress import GroupProgress
from contract.schemas import JobSpec
from contract.settings import Settings
from producer.run_files import (
    number_jobs,
    read_run_file,
    validate_run_file,
)
from producer.submitter import JobSubmitter
from storage import GroupStore


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """An assembled document: its text (failed segments kept in the source language) and what failed."""

    status: str
    text: str
    failed_segments: list[dict[str, Any]]
    report: dict[str, Any] | None = None
    """Placeholder-tag outcomes: ``with_tags``, ``tags_kept``, ``retried`` (segment numbers),
    ``fell_back`` and ``tags_broken`` (segment and source excerpt), ``failed`` (a count)."""


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
    """Runs and documents: submitted through a :class:`JobSubmitter`, followed through a :class:`GroupStore`."""

    def __init__(self, submitter: JobSubmitter, store: GroupStore, redis_url: str) -> None:
        self._submitter = submitter
        self._store = store
        self._redis_url = redis_url

    # Runs ------------------------------------------------------------------------------------

    def submit_run(
        self,
        path: Path,
        *,
        source_lang: str | None,
        target_lang: str | None,
        name: str | None,
        callback_url: str | None,
        on_chunk: Callable[[int, int], None] | None = None,
        run_id: str | None = None,
    ) -> str:
        """Validate the JSONL file, then submit its lines in chunks; return the run id.

        With ``run_id``, submitting is idempotent and resumable: a run not known yet is created
        under that id; a run whose submission stopped half-way (a crash, Redis gone) gets only
        its missing jobs, from its last checkpoint on; a run fully submitted (or cancelled) gets
        nothing more. Job ids derive from the run id and line number, so nothing is queued twice.
        """
        settings = self._submitter.settings
        source = normalize_language(source_lang) if source_lang else None
        target = normalize_language(target_lang) if target_lang else None
        check_callback(callback_url, settings)
        total = validate_run_file(path, source, target, settings.max_text_chars)
        run_id = group_uuid(run_id, "run") if run_id else str(uuid.uuid4())
        existing = self._store.resume_run(run_id, total)
        if existing is None:
            label = storable(name, "the run's name") or path.name.encode("utf-8", "replace").decode()
            self._store.create_run(run_id, source, target, total, label, callback_url)
            start = 0
        elif existing.status != "submitting" or existing.cancel_requested:
            if on_chunk:
                on_chunk(existing.submitted, total)
            return run_id  # submitted in full before, or cancelled: nothing to add
        else:
            start = existing.submitted
        self._submitter.register_group(run_id, "run", total)
        self._submit_lines(path, source, target, run_id, start, total, on_chunk)
        return run_id

    def _submit_lines(
        self,
        path: Path,
        source: str | None,
        target: str | None,
        run_id: str,
        start: int,
        total: int,
        on_chunk: Callable[[int, int], None] | None,
    ) -> None:
        """Queue the run's jobs from number ``start`` on, checkpointing after each chunk; stop if it is cancelled."""
        settings = self._submitter.settings
        submitted = start
        chunk: list[JobSpec] = []
        specs = read_run_file(path, source, target, settings.max_text_chars, run_id, start=start)
        for spec in number_jobs(specs, run_id, start=start):
            chunk.append(spec)
            if len(chunk) >= settings.submit_chunk_size:
                submitted += self._submitter.submit_specs(chunk, only_new=True)
                if self._store.run_submitted(run_id, submitted, done=False):
                    # Cancelled meanwhile: the cancel finishes the run; this chunk may have missed it.
                    self._submitter.cancel_many([spec.job_id for spec in chunk])
                    return
                chunk = []
                if on_chunk:
                    on_chunk(submitted, total)
        submitted += self._submitter.submit_specs(chunk, only_new=True)
        self._store.run_submitted(run_id, submitted, done=True)
        if on_chunk:
            on_chunk(submitted, total)

    def progress(self, kind: str, group_id: str) -> GroupProgress:
        """Status and counts of a run or document; :class:`JobNotFoundError` if unknown."""
        found = self._store.progress(kind, group_uuid(group_id, kind))
        if found is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        return found

    def iter_results(self, run_id: str, *, allow_partial: bool = False) -> Iterator[dict[str, Any]]:
        """The run's results in input order; :class:`RunNotFinishedError` while jobs are pending (unless allowed)."""
        status = self.progress("run", run_id)
        if status.counts.pending and not allow_partial:
            raise RunNotFinishedError(
                f"run {run_id} is {status.counts.percent:.1f}% done ({status.counts.pending} "
                "jobs pending); wait for it, or allow partial results"
            )
        return self._store.iter_results(status.id)

    def cancel(self, kind: str, group_id: str) -> GroupProgress:
        """Cancel every job of a run or document that has not finished; return its progress.

        A run whose submission stopped half-way (still ``submitting``) is finished too: its jobs
        that never reached the queue get a ``cancelled`` row, and its finish is queued.
        """
        group_id = group_uuid(group_id, kind)
        total = self._store.request_cancel(kind, group_id)
        if total is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        job_ids = [job_id_for(group_id, sequence) for sequence in range(total)]
        outcomes = self._submitter.cancel_many(job_ids)
        if kind == "run" and self.progress(kind, group_id).status == "submitting":
            missing = [sequence for sequence, outcome in enumerate(outcomes) if outcome is CancelOutcome.MISSING]
            self._store.cancel_unsubmitted_jobs(group_id, missing, [job_ids[sequence] for sequence in missing])
            self._enqueue(FINISH_TASK, kind, group_id, job_id=f"finish-{kind}-{group_id}")
        return self.progress(kind, group_id)

    # Documents -------------------------------------------------------------------------------

    def submit_document(
        self,
        text: str,
        fmt: str,
        *,
        source_lang: str,
        target_lang: str,
        name: str | None,
        callback_url: str | None,
        max_segment_chars: int | None,
        retranslate: bool = False,
    ) -> str:
        """Store the document and ask the orchestrator (an RQ worker) to split and submit it."""
        limit = check_document(text, fmt, self._submitter.settings, max_segment_chars)
        check_callback(callback_url, self._submitter.settings)
        source, target = normalize_language(source_lang), normalize_language(target_lang)
        document_id = str(uuid.uuid4())
        name = storable(name, "the document's name")
        self._store.create_document(document_id, fmt, text, source, target, name, callback_url, limit, retranslate)
        self._enqueue(SPLIT_TASK, document_id, job_id=f"split-{document_id}")
        return document_id

    def document_result(self, document_id: str) -> DocumentResult:
        """The assembled document; :class:`RunNotFinishedError` until it is assembled."""
        found = self._store.document_output(group_uuid(document_id, "document"))
        if found is None:
            raise JobNotFoundError(f"no document with id {document_id}")
        status, text, failed, report = found
        if text is None:
            raise RunNotFinishedError(f"document {document_id} is {status}; it has not been assembled yet")
        return DocumentResult(status=status, text=text, failed_segments=failed, report=report)

    # Shared ----------------------------------------------------------------------------------

    def _enqueue(self, task: str, *args: Any, job_id: str) -> None:
        enqueue_orchestration(self._redis_url, self._submitter.keys.orchestration_queue, task, *args, job_id=job_id)


def enqueue_orchestration(redis_url: str, queue: str, task: str, *args: Any, job_id: str) -> None:
    """Ask the orchestrator (an RQ worker) to run ``task``; retried with backoff, idempotent by ``job_id``.

    Synchronous (RQ is): an asyncio caller runs it in a thread.
    """
    from rq import Queue, Retry

    connection = redis.Redis.from_url(redis_url)
    try:
        Queue(queue, connection=connection).enqueue(
            task,
            *args,
            job_id=job_id,
            job_timeout=SPLIT_TIMEOUT_SECONDS,
            result_ttl=3_600,
            retry=Retry(max=UNCAPPED_RETRIES, interval=retry_intervals(1, RETRY_MAX_SECONDS)),
        )
    finally:
        connection.close()


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
