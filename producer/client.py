"""The synchronous client applications import: :class:`~producer.AsyncClient`'s operations, run for them.

Nothing is implemented here: each method runs the asyncio client's coroutine of the same name
on an event loop the client owns (:class:`~contract.sync_bridge.LoopThread`, a daemon thread),
so the two clients cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from typing_extensions import Unpack

from broker.keys import RedisKeys
from contract.progress import GroupProgress
from contract.schemas import Job, JobSpec, TranslationRequest
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from producer.async_client import AsyncClient
from producer.groups import DocumentResult
from producer.requests import InvalidJobIdError, RequestOptions, parse_job_id
from storage.embedded import resolve_urls

T = TypeVar("T")

__all__ = ["Client", "InvalidJobIdError", "parse_job_id"]  # the last two moved to producer.requests


class Client:
    """A synchronous dragoman client for applications.

    It writes jobs to Redis (state record and stream entry in one atomic step) and reads
    finished jobs from PostgreSQL; it never loads an engine. Build it from :class:`Settings`
    (``DRAGOMAN_*`` variables or the embedded servers in ``data_dir``) or from explicit URLs.
    Every method is :class:`~producer.AsyncClient`'s (see there), run to completion; close the
    client (or use ``with``) to release its connections and its event-loop thread.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis_url: str | None = None,
        database_url: str | None = None,
    ) -> None:
        settings = settings or Settings()
        if redis_url is None or database_url is None:
            urls = resolve_urls(
                settings.model_copy(
                    update={
                        "redis_url": redis_url or settings.redis_url,
                        "database_url": database_url or settings.database_url,
                    }
                )
            )
            redis_url, database_url = urls.redis_url, urls.database_url
        self.core = AsyncClient(settings, redis_url=redis_url, database_url=database_url)
        """The asyncio client this one runs (its loop is this client's: use it through :meth:`run`)."""
        self._loop = LoopThread("dragoman-client")

    @property
    def settings(self) -> Settings:
        """The settings jobs are validated and submitted with."""
        return self.core.settings

    @property
    def keys(self) -> RedisKeys:
        """This deployment's Redis key names."""
        return self.core.keys

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run a coroutine of :attr:`core` on this client's loop and return its result (what no method wraps)."""
        return self._loop.run(awaitable)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the Redis and PostgreSQL connections and stop the client's event-loop thread (idempotent)."""
        if self._loop.closed:
            return
        try:
            self.run(self.core.close())
        finally:
            self._loop.close()

    # Submitting ------------------------------------------------------------------------------

    def submit(
        self,
        request: TranslationRequest | str,
        source_lang: str | None = None,
        target_lang: str | None = None,
        **options: Unpack[RequestOptions],
    ) -> str:
        """Enqueue one translation (a :class:`TranslationRequest`, or its fields) and return its job id."""
        return self.run(self.core.submit(request, source_lang, target_lang, **options))

    def submit_many(self, items: Iterable[TranslationRequest | Mapping[str, Any]]) -> list[str]:
        """Enqueue many translations, pipelined in chunks; return their ids in input order."""
        return self.run(self.core.submit_many(items))

    def submit_specs(self, specs: Sequence[JobSpec]) -> int:
        """Enqueue already validated jobs (ids and group fields set by the caller) in chunks; return how many."""
        return self.run(self.core.submit_specs(specs))

    # Looking up and cancelling ---------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        """The job's status, result, error and timings."""
        return self.run(self.core.get(job_id))

    def wait(self, job_id: str, timeout: float = 60.0, poll_interval: float = 0.05) -> Job:
        """Block until the job is final, and return it; :class:`JobTimeoutError` after ``timeout`` seconds."""
        return self.run(self.core.wait(job_id, timeout, poll_interval))

    def wait_many(self, job_ids: Sequence[str], timeout: float = 60.0, poll_interval: float = 0.05) -> list[Job]:
        """Block until every job is final, and return them in order (one watch for all of them)."""
        return self.run(self.core.wait_many(job_ids, timeout, poll_interval))

    def cancel(self, job_id: str) -> Job:
        """Cancel a job and return its state."""
        return self.run(self.core.cancel(job_id))

    def cancel_many(self, job_ids: Sequence[str]) -> None:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are."""
        self.run(self.core.cancel_many(job_ids))

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
        model: str | None = None,
    ) -> str:
        """Submit a JSONL run (``custom_id`` and ``text`` per line); return the run id.

        ``model``: the served model of lines that name none (see :meth:`AsyncClient.submit_run`).
        ``on_chunk(submitted, total)`` is called on the client's event-loop thread after each chunk:
        keep it quick, and do not call the client from it.
        """
        return self.run(
            self.core.submit_run(
                path,
                source_lang=source_lang,
                target_lang=target_lang,
                name=name,
                callback_url=callback_url,
                on_chunk=on_chunk,
                run_id=run_id,
                model=model,
            )
        )

    def get_run(self, run_id: str) -> GroupProgress:
        """A run's status, counts per status, rate and estimated time left."""
        return self.run(self.core.get_run(run_id))

    def iter_run_results(
        self, run_id: str, *, allow_partial: bool = False, flagged: bool | str | Iterable[str] = False
    ) -> Iterator[dict[str, Any]]:
        """One dict per input line, in input order: ``custom_id`` with ``translation`` or ``error``, and
        ``quality_flags`` for a checked translation; ``flagged``: ``True`` only the lines whose checks found
        something, flag names only those with any of them."""
        results = self.core.iter_run_results(run_id, allow_partial=allow_partial, flagged=flagged)
        return self._loop.iterate(self.run(results))

    def cancel_run(self, run_id: str) -> GroupProgress:
        """Cancel the run's jobs that have not finished."""
        return self.run(self.core.cancel_run(run_id))

    def submit_document(
        self,
        text: str,
        fmt: str,
        source_lang: str | None,
        target_lang: str,
        *,
        name: str | None = None,
        callback_url: str | None = None,
        max_segment_chars: int | None = None,
        retranslate: bool = False,
        model: str | None = None,
        glossary: Mapping[str, str] | None = None,
        context: str | None = None,
        formality: str | None = None,
    ) -> str:
        """Submit a document (one of ``contract.documents.FORMATS``); an orchestrator splits it. Returns its id.

        ``source_lang`` ``"auto"`` or ``None``: the orchestrator detects the document's language from its text
        (:attr:`~contract.progress.GroupProgress.detected_source_lang` of :meth:`get_document` once split).

        ``model``: the served model its segments go to (without it the deployment's routes choose).
        ``glossary``, ``context`` and ``formality``: every segment job's, as :meth:`submit` takes them.
        """
        return self.run(
            self.core.submit_document(
                text,
                fmt,
                source_lang,
                target_lang,
                name=name,
                callback_url=callback_url,
                max_segment_chars=max_segment_chars,
                retranslate=retranslate,
                model=model,
                glossary=glossary,
                context=context,
                formality=formality,
            )
        )

    def get_document(self, document_id: str) -> GroupProgress:
        """A document's status and segment counts."""
        return self.run(self.core.get_document(document_id))

    def document_result(self, document_id: str) -> DocumentResult:
        """The assembled document and its failed segments (raises while it is not assembled)."""
        return self.run(self.core.document_result(document_id))

    def cancel_document(self, document_id: str) -> GroupProgress:
        """Cancel the document's segments that have not finished."""
        return self.run(self.core.cancel_document(document_id))
