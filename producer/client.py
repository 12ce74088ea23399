"""The API applications import: submit translation jobs, look them up, wait for them, cancel them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import redis

from broker.keys import RedisKeys
from broker.scripts import CancelOutcome
from contract.backoff import Backoff
from contract.errors import JobTimeoutError
from contract.progress import GroupProgress
from contract.schemas import Job, JobSpec, TranslationRequest
from contract.settings import Settings
from producer.groups import DocumentResult, Groups
from producer.requests import (
    InvalidJobIdError,
    live_job,
    parse_job_id,
    prepare,
    prepare_many,
    refuse_cancel,
    settled_job,
)
from producer.submitter import JobSubmitter
from storage import GroupStore, JobStore, PostgresConnection
from storage.embedded import resolve_urls

_MAX_POLL_INTERVAL_S = 0.5  # what Client.wait's polling backs off to

__all__ = ["Client", "InvalidJobIdError", "parse_job_id"]  # the last two moved to producer.requests


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
        priority: str | None = None,
        glossary: Mapping[str, str] | None = None,
        context: str | None = None,
        formality: str | None = None,
        memory: bool = True,
    ) -> str:
        """Enqueue one translation and return its job id.

        Invalid input raises a subclass of :class:`InvalidJobError` before anything is written.
        With an ``idempotency_key``, submitting again returns the first job's id. ``priority``:
        ``"interactive"`` (the default) or ``"bulk"`` (waits behind interactive jobs, with a share).
        ``source_lang="auto"`` has the worker detect the language (the row records what it found).
        ``glossary`` maps source terms to the target terms the translation must use (the row's
        ``glossary_misses`` lists those it did not); ``context`` is text the model sees but does
        not translate; ``formality`` is ``"formal"`` or ``"informal"`` where the model's profile
        supports it; ``memory=False`` neither serves this job from the translation memory nor
        stores its translation there.
        """
        prepared = prepare(
            self.settings,
            text,
            source_lang,
            target_lang,
            metadata=metadata,
            idempotency_key=idempotency_key,
            priority=priority,
            glossary=dict(glossary) if isinstance(glossary, Mapping) else glossary,
            context=context,
            formality=formality,
            memory=memory,
        )
        return self.submitter.write([prepared])[0]

    def submit_many(self, items: Iterable[TranslationRequest | Mapping[str, Any]]) -> list[str]:
        """Enqueue many translations, pipelined in chunks; return their ids in input order.

        Every item is validated first (everything Redis and PostgreSQL will store: NUL
        characters, lone surrogates, metadata types, depth and size): one bad item raises
        (naming its index) and nothing at all is written. Writing goes in pipelined chunks; if
        Redis fails after a chunk was queued, :class:`~contract.errors.SubmitInterruptedError`
        says how many were (``written``: their ids), and submitting the same items again with
        ``idempotency_key`` set adds only the missing ones.
        """
        prepared = prepare_many(self.settings, items)
        return self.submitter.write(prepared)

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
        run_id: str | None = None,
    ) -> str:
        """Submit a JSONL run (``custom_id`` and ``text`` per line); return the run id.

        Every line is validated first: a bad line raises :class:`InvalidRunFileError` (listing
        the bad lines) and nothing is submitted. ``on_chunk(submitted, total)`` reports progress.
        With ``run_id`` (a UUID of the caller's) submitting is idempotent: calling again with the
        same file and id after a crash or an outage adds only the jobs still missing.
        """
        return self.groups.submit_run(
            Path(path),
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            on_chunk=on_chunk,
            run_id=run_id,
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
        retranslate: bool = False,
    ) -> str:
        """Submit a document (one of ``contract.documents.FORMATS``); an orchestrator splits it. Returns its id.

        ``text`` is the file's text, or for a ``.docx`` its bytes as base64
        (``contract.documents.encode_document``). ``retranslate``: a ``.po`` or XLIFF file's entries
        that already have a translation are translated again (by default they are kept).
        """
        return self.groups.submit_document(
            text,
            fmt,
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            max_segment_chars=max_segment_chars,
            retranslate=retranslate,
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

    # Looking up ------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        """The job's status, result, error and timings.

        Queued and running jobs are answered from their Redis state record, finished ones from
        PostgreSQL. Raises :class:`JobNotFoundError` if neither knows the id.
        """
        job_id = parse_job_id(job_id)
        state: dict[str, str] = self.redis.hgetall(self.keys.state(job_id))  # type: ignore[assignment]
        return live_job(job_id, state) or settled_job(job_id, state, self._store.get(job_id))

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
        refuse_cancel(job_id, outcome, self._store.get(job_id) if outcome is CancelOutcome.MISSING else None)
        return self.get(job_id)
