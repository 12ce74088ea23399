"""The API applications import: submit translation jobs, look them up, wait for them, cancel them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import redis

from contract.backoff import Backoff
from contract.errors import (
    InvalidJobError,
    JobNotCancellableError,
    JobNotFoundError,
    JobTimeoutError,
)
from contract.ids import canonical_uuid
from contract.keys import RedisKeys
from contract.progress import GroupProgress
from contract.schemas import (
    Job,
    JobSpec,
    JobStatus,
    TranslationRequest,
    build_job_spec,
)
from contract.scripts import CancelOutcome
from contract.services import resolve_urls
from contract.settings import Settings
from contract.state import state_to_job
from producer.groups import DocumentResult, Groups
from producer.submitter import JobSubmitter
from storage import GroupStore, JobStore, PostgresConnection

_MAX_POLL_INTERVAL_S = 0.5  # what Client.wait's polling backs off to


class InvalidJobIdError(InvalidJobError):
    """The string given as a job id is not a UUID."""


def parse_job_id(job_id: str) -> str:
    """Canonical form of a job id; raises :class:`InvalidJobIdError` if it is not a UUID."""
    canonical = canonical_uuid(job_id)
    if canonical is None:
        raise InvalidJobIdError(f"{job_id!r} is not a job id (job ids are UUIDs)")
    return canonical


class Client:
    """A synchronous dragoman client for applications.

    It writes jobs to Redis (state record and stream entry in one atomic step) and reads
    finished jobs from PostgreSQL; it never loads an engine. Build it from :class:`Settings`
    (``DRAGOMAN_*`` variables or the embedded servers in ``data_dir``) or from explicit URLs.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis_url: str | None = None,
        database_url: str | None = None,
    ) -> None:
        self.settings = settings or Settings()
        if redis_url is None or database_url is None:
            urls = resolve_urls(
                self.settings.model_copy(
                    update={
                        "redis_url": redis_url or self.settings.redis_url,
                        "database_url": database_url or self.settings.database_url,
                    }
                )
            )
            redis_url, database_url = urls.redis_url, urls.database_url
        self.keys = RedisKeys.from_settings(self.settings)
        self.redis: redis.Redis = redis.Redis.from_url(redis_url, decode_responses=True)
        self._postgres = PostgresConnection(database_url)
        self._store = JobStore(self._postgres)
        self.submitter = JobSubmitter(self.redis, self.keys, self.settings)
        self.groups = Groups(self.submitter, GroupStore(self._postgres), redis_url)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the Redis and PostgreSQL connections."""
        self.redis.close()
        self._postgres.close()

    # Submitting ------------------------------------------------------------------------------

    def submit(
        self,
        text: str,
        source_lang: str,
        target_lang: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Enqueue one translation and return its job id.

        Invalid input raises a subclass of :class:`InvalidJobError` before anything is written.
        With an ``idempotency_key``, submitting again returns the first job's id.
        """
        spec = self._spec(text, source_lang, target_lang, metadata)
        return self.submitter.write([(spec, _check_key(idempotency_key))])[0]

    def submit_many(self, items: Iterable[TranslationRequest | Mapping[str, Any]]) -> list[str]:
        """Enqueue many translations, pipelined in chunks; return their ids in input order.

        Every item is validated first: one bad item raises (naming its index) and nothing at
        all is written.
        """
        prepared: list[tuple[JobSpec, str | None]] = []
        for index, item in enumerate(items):
            request = _as_request(item, index)
            try:
                spec = self._spec(request.text, request.source_lang, request.target_lang, request.metadata)
                prepared.append((spec, _check_key(request.idempotency_key)))
            except InvalidJobError as exc:
                raise type(exc)(f"item {index}: {exc}") from None
        ids: list[str] = []
        chunk = self.settings.submit_chunk_size
        for start in range(0, len(prepared), chunk):
            ids.extend(self.submitter.write(prepared[start : start + chunk]))
        return ids

    def submit_specs(self, specs: Sequence[JobSpec]) -> int:
        """Enqueue already validated jobs (ids and group fields set by the caller) in chunks; return how many."""
        return self.submitter.submit_specs(specs)

    # Runs and documents ----------------------------------------------------------------------

    def submit_run(
        self,
        path: str | Path,
        *,
        source_lang: str | None = None,
        target_lang: str | None = None,
        name: str | None = None,
        callback_url: str | None = None,
        on_chunk: Callable[[int, int], None] | None = None,
    ) -> str:
        """Submit a JSONL run (``custom_id`` and ``text`` per line); return the run id.

        Every line is validated first: a bad line raises :class:`InvalidRunFileError` (listing
        the bad lines) and nothing is submitted. ``on_chunk(submitted, total)`` reports progress.
        """
        return self.groups.submit_run(
            Path(path),
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            on_chunk=on_chunk,
        )

    def get_run(self, run_id: str) -> GroupProgress:
        """A run's status, counts per status, rate and estimated time left."""
        return self.groups.progress("run", run_id)

    def iter_run_results(self, run_id: str, *, allow_partial: bool = False) -> Iterator[dict[str, Any]]:
        """One dict per input line, in input order: ``custom_id`` with ``translation`` or ``error``."""
        return self.groups.iter_results(run_id, allow_partial=allow_partial)

    def cancel_run(self, run_id: str) -> GroupProgress:
        """Cancel the run's jobs that have not finished."""
        return self.groups.cancel("run", run_id)

    def submit_document(
        self,
        text: str,
        fmt: str,
        source_lang: str,
        target_lang: str,
        *,
        name: str | None = None,
        callback_url: str | None = None,
        max_segment_chars: int | None = None,
    ) -> str:
        """Submit a ``txt``, ``md`` or ``html`` document; an orchestrator splits it. Returns the document id."""
        return self.groups.submit_document(
            text,
            fmt,
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            max_segment_chars=max_segment_chars,
        )

    def get_document(self, document_id: str) -> GroupProgress:
        """A document's status and segment counts."""
        return self.groups.progress("document", document_id)

    def document_result(self, document_id: str) -> DocumentResult:
        """The assembled document and its failed segments (raises while it is not assembled)."""
        return self.groups.document_result(document_id)

    def cancel_document(self, document_id: str) -> GroupProgress:
        """Cancel the document's segments that have not finished."""
        return self.groups.cancel("document", document_id)

    def _spec(self, text: object, source: str, target: str, metadata: object) -> JobSpec:
        return build_job_spec(
            str(uuid.uuid4()),
            text,
            source,
            target,
            max_chars=self.settings.max_text_chars,
            metadata=dict(metadata) if isinstance(metadata, Mapping) else metadata,
        )

    # Looking up ------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        """The job's status, result, error and timings.

        Queued and running jobs are answered from their Redis state record, finished ones from
        PostgreSQL. Raises :class:`JobNotFoundError` if neither knows the id.
        """
        job_id = parse_job_id(job_id)
        state: dict[str, str] = self.redis.hgetall(self.keys.state(job_id))  # type: ignore[assignment]
        status = state.get("status")
        if status in (JobStatus.QUEUED, JobStatus.RUNNING):
            return state_to_job(job_id, state)
        row = self._store.get(job_id)
        if row is not None:
            return row
        if state:
            return state_to_job(job_id, state)
        raise JobNotFoundError(f"no job with id {job_id} (it may never have existed, or expired)")

    def wait(self, job_id: str, timeout: float = 60.0, poll_interval: float = 0.05) -> Job:
        """Block until the job is succeeded, failed or cancelled, and return it.

        Raises :class:`JobTimeoutError` after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        backoff = Backoff(poll_interval, max(poll_interval, _MAX_POLL_INTERVAL_S))
        while True:
            job = self.get(job_id)
            if job.status.is_final:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise JobTimeoutError(
                    f"job {job.id} is still {job.status.value} after {timeout:g}s; "
                    "is a worker running (`dragoman worker`)?"
                )
            backoff.sleep(limit=remaining)

    def cancel_many(self, job_ids: Sequence[str]) -> None:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are."""
        self.submitter.cancel_many(job_ids)

    def cancel(self, job_id: str) -> Job:
        """Cancel a job and return its state.

        A queued job is cancelled at once (the worker skips it). A running job stays
        ``running`` until the worker running it aborts it in the engine and records it as
        ``cancelled`` (or it finishes first). Cancelling a cancelled job is a no-op. Raises
        :class:`JobNotCancellableError` for a job that already succeeded or failed, and
        :class:`JobNotFoundError` for an unknown id.
        """
        job_id = parse_job_id(job_id)
        outcome = self.submitter.cancel(job_id)
        if outcome in (CancelOutcome.CANCELLED, CancelOutcome.CANCEL_REQUESTED):
            return self.get(job_id)
        status = outcome.value
        if outcome is CancelOutcome.MISSING:
            finished = self._store.get(job_id)
            if finished is None:
                raise JobNotFoundError(f"no job with id {job_id}")
            status = finished.status.value
        if status == JobStatus.CANCELLED:
            return self.get(job_id)
        raise JobNotCancellableError(f"job {job_id} already {status}; only queued or running jobs can be cancelled")


def _check_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip() or len(key) > 256:
        raise InvalidJobError("idempotency_key must be a non-empty string of at most 256 characters")
    return key


def _as_request(item: TranslationRequest | Mapping[str, Any], index: int) -> TranslationRequest:
    if isinstance(item, TranslationRequest):
        return item
    if not isinstance(item, Mapping):
        raise InvalidJobError(f"item {index}: expected a TranslationRequest or a dict, got {type(item).__name__}")
    unknown = set(item) - {"text", "source_lang", "target_lang", "metadata", "idempotency_key"}
    if unknown:
        raise InvalidJobError(f"item {index}: unknown field(s) {sorted(unknown)}")
    try:
        return TranslationRequest(
            text=item["text"],
            source_lang=item["source_lang"],
            target_lang=item["target_lang"],
            metadata=item.get("metadata"),
            idempotency_key=item.get("idempotency_key"),
        )
    except KeyError as exc:
        raise InvalidJobError(f"item {index}: missing field {exc.args[0]!r}") from None
