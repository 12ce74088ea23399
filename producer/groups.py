"""Submitting, following, cancelling and collecting runs and documents (behind :class:`producer.Client`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from contract.documents import FORMATS, SPLIT_TASK, SUFFIXES
from contract.errors import ConfigurationError, InvalidJobError, JobNotFoundError, RunNotFinishedError
from contract.ids import job_id_for
from contract.languages import normalize_language
from contract.progress import GroupProgress
from contract.schemas import JobSpec
from producer.run_files import (
    number_jobs,
    read_run_file,
    validate_run_file,
)
from producer.submitter import JobSubmitter
from storage.runs import GroupStore


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """An assembled document: its text (failed segments kept in the source language) and what failed."""

    status: str
    text: str
    failed_segments: list[dict[str, Any]]


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
    ) -> str:
        """Validate the JSONL file, then submit its lines in chunks; return the run id."""
        settings = self._submitter.settings
        source = normalize_language(source_lang) if source_lang else None
        target = normalize_language(target_lang) if target_lang else None
        self._check_callback(callback_url)
        total = validate_run_file(path, source, target, settings.max_text_chars)
        run_id = str(uuid.uuid4())
        self._store.create_run(run_id, source, target, total, name or path.name, callback_url)
        self._register(run_id, "run", total)
        submitted = 0
        chunk: list[JobSpec] = []
        for spec in number_jobs(read_run_file(path, source, target, settings.max_text_chars, run_id), run_id):
            chunk.append(spec)
            if len(chunk) >= settings.submit_chunk_size:
                submitted += self._submitter.submit_specs(chunk)
                self._store.run_submitted(run_id, submitted, done=False)
                chunk = []
                if on_chunk:
                    on_chunk(submitted, total)
        submitted += self._submitter.submit_specs(chunk)
        self._store.run_submitted(run_id, submitted, done=True)
        if on_chunk:
            on_chunk(submitted, total)
        return run_id

    def progress(self, kind: str, group_id: str) -> GroupProgress:
        """Status and counts of a run or document; :class:`JobNotFoundError` if unknown."""
        found = self._store.progress(kind, _uuid(group_id, kind))
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
        """Cancel every job of a run or document that has not finished; return its progress."""
        group_id = _uuid(group_id, kind)
        total = self._store.request_cancel(kind, group_id)
        if total is None:
            raise JobNotFoundError(f"no {kind} with id {group_id}")
        self._submitter.cancel_many([job_id_for(group_id, sequence) for sequence in range(total)])
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
    ) -> str:
        """Store the document and ask the orchestrator (an RQ worker) to split and submit it."""
        settings = self._submitter.settings
        if fmt not in FORMATS:
            raise InvalidJobError(f"unsupported document format {fmt!r}; use one of {', '.join(FORMATS)}")
        if not text.strip():
            raise InvalidJobError("the document is empty; there is nothing to translate")
        if "\x00" in text:
            raise InvalidJobError("the document contains NUL characters; is it a binary file?")
        limit = max_segment_chars or settings.max_segment_chars
        if not 20 <= limit <= settings.max_text_chars:
            raise InvalidJobError(f"max segment length must be between 20 and {settings.max_text_chars} characters")
        self._check_callback(callback_url)
        source, target = normalize_language(source_lang), normalize_language(target_lang)
        document_id = str(uuid.uuid4())
        self._store.create_document(document_id, fmt, text, source, target, name, callback_url, limit)
        self._enqueue(SPLIT_TASK, document_id, job_id=f"split-{document_id}")
        return document_id

    def document_result(self, document_id: str) -> DocumentResult:
        """The assembled document; :class:`RunNotFinishedError` until it is assembled."""
        found = self._store.document_output(_uuid(document_id, "document"))
        if found is None:
            raise JobNotFoundError(f"no document with id {document_id}")
        status, text, failed = found
        if text is None:
            raise RunNotFinishedError(f"document {document_id} is {status}; it has not been assembled yet")
        return DocumentResult(status=status, text=text, failed_segments=failed)

    # Shared ----------------------------------------------------------------------------------

    def _register(self, group_id: str, kind: str, total: int) -> None:
        """The Redis record the worker's finish script counts against (see ``contract/scripts/finish.lua``)."""
        keys, ttl = self._submitter.keys, self._submitter.settings.state_ttl_seconds
        with self._submitter.redis.pipeline(transaction=True) as pipe:
            pipe.hset(keys.group(group_id), mapping={"kind": kind, "id": group_id, "total": total})
            pipe.expire(keys.group(group_id), ttl)
            pipe.execute()

    def _enqueue(self, task: str, *args: Any, job_id: str) -> None:
        from rq import Queue

        connection = redis.Redis.from_url(self._redis_url)
        try:
            Queue(self._submitter.keys.orchestration_queue, connection=connection).enqueue(
                task, *args, job_id=job_id, job_timeout=600, result_ttl=3_600
            )
        finally:
            connection.close()

    def _check_callback(self, callback_url: str | None) -> None:
        if callback_url is None:
            return
        if not callback_url.startswith(("http://", "https://")):
            raise InvalidJobError(f"callback URL must be http:// or https://, got {callback_url!r}")
        if not self._submitter.settings.webhook_secret:
            raise ConfigurationError("a callback URL needs DRAGOMAN_WEBHOOK_SECRET (deliveries are signed with it)")


def _uuid(value: str, kind: str) -> str:
    try:
        return str(uuid.UUID(str(value).strip()))
    except ValueError:
        raise JobNotFoundError(f"{value!r} is not a {kind} id (ids are UUIDs)") from None
