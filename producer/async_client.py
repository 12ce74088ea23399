"""The client's one implementation: every operation on jobs, runs and documents, as a coroutine.

Redis through ``redis.asyncio``, PostgreSQL through psycopg's async connections: no call blocks
the event loop, so a web server (dragoman's own HTTP API included) can serve many requests on
one loop. :class:`~producer.Client` is a thin synchronous wrapper that runs these coroutines.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from typing_extensions import Unpack

from broker.job_records import read_state, read_states
from broker.keys import RedisKeys
from broker.orchestration import open_rq_connection, orchestration_redis_url
from broker.redis_client import open_redis
from broker.scripts import CancelOutcome
from contract.backoff import Backoff
from contract.errors import ConfigurationError, JobTimeoutError
from contract.flag_filter import parse_flag_filter
from contract.progress import GroupProgress
from contract.schemas import Job, JobSpec, TranslationRequest
from contract.settings import Settings
from producer.finish_waiter import FinishWaiter
from producer.groups import ChunkCallback, DocumentResult, Groups
from producer.model_catalog import ModelCatalog
from producer.requests import (
    RequestOptions,
    check_tenant,
    live_job,
    parse_job_id,
    prepare,
    prepare_many,
    refuse_cancel,
    settled_job,
    translation_request,
)
from producer.submitter import JobSubmitter
from storage import AsyncConnectionPool, GroupStore, JobStore

_MAX_POLL_INTERVAL_S = 0.5  # what wait's polling backs off to while completion events cannot be received
_SAFETY_POLL_S = 1.0  # wait's status read while events arrive: a missed one costs at most this


def _unfinished_message(unfinished: Sequence[Job], total: int, timeout: float) -> str:
    """Why a wait timed out (what the unfinished jobs still are), with the hint a user can act on."""
    hint = "is a worker running (`dragoman worker`)?"
    if total == 1:
        return f"job {unfinished[0].id} is still {unfinished[0].status.value} after {timeout:g}s; {hint}"
    statuses = Counter(job.status.value for job in unfinished)
    counted = ", ".join(f"{count:,} {status}" for status, count in sorted(statuses.items()))
    return f"{len(unfinished):,} of {total:,} jobs are still unfinished after {timeout:g}s ({counted}); {hint}"


class AsyncClient:
    """An asyncio dragoman client: submit, look up, wait for and cancel jobs, runs and documents.

    Give it the services' URLs or :class:`Settings` with both set: resolving the embedded
    servers blocks, so do that before the loop (or use ``storage.embedded.resolve_urls`` in a
    thread; :class:`~producer.Client` does it for you). Close it with ``await client.close()``
    or ``async with``.

    ``tenant`` (every method takes it) scopes a call to one tenant of the HTTP API: jobs, runs
    and documents are submitted as the tenant's, and another tenant's are answered as not found.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis_url: str | None = None,
        database_url: str | None = None,
        max_connections: int = 8,
        redis_connections: int | None = None,
        pool_wait_s: float = 10.0,
    ) -> None:
        self.settings = settings or Settings()
        redis_url = redis_url or self.settings.redis_url
        database_url = database_url or self.settings.database_url
        if redis_url is None or database_url is None:
            raise ConfigurationError(
                "AsyncClient needs both service URLs (DRAGOMAN_REDIS_URL and DRAGOMAN_DATABASE_URL, or "
                "redis_url= and database_url=); resolve the embedded servers first with storage.embedded.resolve_urls"
            )
        self.redis_url = redis_url
        self.database_url = database_url
        self.keys = RedisKeys.from_settings(self.settings)
        # Concurrent calls (the HTTP API's requests, Client's calls from many threads) wait for a
        # free connection, as they do for PostgreSQL's, instead of failing with "too many connections".
        # ``redis_connections`` and ``pool_wait_s`` size them (the HTTP API's settings); a wait past
        # ``pool_wait_s`` raises a ServerBusyError (contract.overload).
        self.redis: aioredis.Redis = open_redis(
            redis_url,
            max_connections=redis_connections or max(4, max_connections * 4),
            wait_for_connection_s=pool_wait_s,
        )
        self.pool = AsyncConnectionPool(database_url, max_connections=max_connections, acquire_timeout_s=pool_wait_s)
        self._store = JobStore(self.pool)
        self._rq: redis.Redis | None = None  # RQ's Redis, opened on first use (_rq_connection)
        self.submitter = JobSubmitter(self.redis, self.keys, self.settings)
        self.groups = Groups(self.submitter, GroupStore(self.pool), self._rq_connection)
        self.models = ModelCatalog(self.redis, self.keys, self.submitter.models)
        self._finishes = FinishWaiter(self.redis, self.keys)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the Redis and PostgreSQL connections."""
        await self._finishes.close()
        await self.redis.aclose()
        await self.pool.close()
        if self._rq is not None:
            self._rq.close()

    def _rq_connection(self) -> redis.Redis:
        """The connection to RQ's Redis (``broker.orchestration.orchestration_redis_url``), opened on first use.

        Raises :class:`~contract.errors.ConfigurationError` on a Redis Cluster with no
        ``DRAGOMAN_ORCHESTRATION_REDIS_URL``: only runs and documents need RQ, so a producer of jobs
        alone works on a cluster without it.
        """
        if self._rq is None:
            self._rq = open_rq_connection(orchestration_redis_url(self.settings, self.redis_url))
        return self._rq

    # Submitting ------------------------------------------------------------------------------

    async def submit(
        self,
        request: TranslationRequest | str,
        source_lang: str | None = None,
        target_lang: str | None = None,
        *,
        tenant: str | None = None,
        **options: Unpack[RequestOptions],
    ) -> str:
        """Enqueue one translation and return its job id.

        ``request`` is a :class:`TranslationRequest`, or its text with ``source_lang``,
        ``target_lang`` and the request's other fields as keywords. Invalid input raises a
        subclass of :class:`InvalidJobError` before anything is written. With an
        ``idempotency_key``, submitting again returns the first job's id. ``lane``:
        ``"interactive"`` (the default) or ``"bulk"`` (waits behind interactive jobs, with a share).
        ``source_lang="auto"`` has the worker detect the language (the row records what it found);
        a text it cannot tell with confidence fails the job, unless ``source_hints`` (language codes
        the text is likely in, most likely first, e.g. ``["en"]``) make the detection a best guess.
        ``glossary`` maps source terms to the target terms the translation must use (the row's
        ``glossary_misses`` lists those it did not); ``context`` is text the model sees but does
        not translate; ``formality`` is ``"formal"`` or ``"informal"`` where the model's profile
        supports it; ``memory=False`` neither serves this job from the translation memory nor
        stores its translation there. ``model`` names a served model (``GET /v1/models``; an
        unknown name raises :class:`~contract.errors.ModelNotFoundError`); without it the
        deployment's routes choose (``DRAGOMAN_MODEL_ROUTES``, else ``DRAGOMAN_DEFAULT_MODEL``).
        """
        prepared = prepare(
            self.settings, translation_request(request, source_lang, target_lang, options), tenant=tenant
        )
        return (await self.submitter.write([prepared]))[0]

    async def submit_many(
        self, items: Iterable[TranslationRequest | Mapping[str, Any]], *, tenant: str | None = None
    ) -> list[str]:
        """Enqueue many translations, pipelined in chunks; return their ids in input order.

        Every item is validated first (everything Redis and PostgreSQL will store: NUL
        characters, lone surrogates, metadata types, depth and size): one bad item raises
        (naming its index) and nothing at all is written. Writing goes in pipelined chunks; if
        Redis fails after a chunk was queued, :class:`~contract.errors.SubmitInterruptedError`
        says how many were (``written``: their ids), and submitting the same items again with
        ``idempotency_key`` set adds only the missing ones.
        """
        return await self.submitter.write(prepare_many(self.settings, items, tenant=tenant))

    async def submit_specs(self, specs: Sequence[JobSpec]) -> int:
        """Enqueue already validated jobs (ids and group fields set by the caller) in chunks; return how many."""
        return await self.submitter.submit_specs(specs)

    # Looking up ------------------------------------------------------------------------------

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        """The job's status, result, error and timings.

        Queued and running jobs are answered from their Redis state record, finished ones from
        PostgreSQL. Raises :class:`JobNotFoundError` if neither knows the id. A queued job whose
        model no live worker serves says so in ``waiting_for`` (the live workers are read at most
        once a second).
        """
        job_id = parse_job_id(job_id)
        state = await read_state(self.redis, self.keys, job_id)
        job = check_tenant(live_job(job_id, state) or settled_job(job_id, state, await self._store.get(job_id)), tenant)
        waiting = await self.models.waiting_for(job)
        return job if waiting is None else job.model_copy(update={"waiting_for": waiting})

    async def wait(
        self,
        job_id: str,
        timeout: float = 60.0,  # noqa: ASYNC109 (the synchronous Client's signature)
        poll_interval: float = 0.05,
        *,
        tenant: str | None = None,
    ) -> Job:
        """Wait (without blocking the loop) until the job is succeeded, failed or cancelled, and return it.

        Woken by the job's completion event (the events channel), with a status read every
        second as a safety net; polled every ``poll_interval`` seconds, backing off to 0.5 s, while
        events cannot be received. Raises :class:`JobTimeoutError` after ``timeout`` seconds.
        """
        (job,) = await self.wait_many([job_id], timeout, poll_interval, tenant=tenant)
        return job

    async def wait_many(
        self,
        job_ids: Sequence[str],
        timeout: float = 60.0,  # noqa: ASYNC109 (the synchronous Client's signature)
        poll_interval: float = 0.05,
        *,
        tenant: str | None = None,
    ) -> list[Job]:
        """Wait (without blocking the loop) until every job is succeeded, failed or cancelled; them, in order.

        One watch over the whole set (one completion-event subscription per client, not one waiter per
        job): a completion event wakes it, and it reads the jobs published since, their state records
        pipelined in one round trip and the finished ones' rows in one statement. Every unfinished job
        is read the same way on the first pass (one that finished before the watch began is not
        missed) and every second as a safety net; polled every ``poll_interval`` seconds, backing off
        to 0.5 s, while events cannot be received. Raises :class:`JobNotFoundError` for an unknown id
        (or another tenant's) and :class:`JobTimeoutError` after ``timeout`` seconds.
        """
        ids = [parse_job_id(job_id) for job_id in job_ids]
        unfinished = set(ids)
        if not unfinished:
            return []
        latest: dict[str, Job] = {}  # each job as last read (final once it is)
        deadline = time.monotonic() + timeout
        backoff = Backoff(poll_interval, max(poll_interval, _MAX_POLL_INTERVAL_S))
        async with self._finishes.watch(unfinished, ready_within=min(timeout, 0.25)) as watch:
            watch.take()  # before each read: an event published after it wakes the wait below
            to_read = sorted(unfinished)
            next_full_read = time.monotonic() + _SAFETY_POLL_S
            while True:
                for job in await self._read_jobs(to_read, tenant):
                    latest[job.id] = job
                    if job.status.is_final:
                        unfinished.discard(job.id)
                if not unfinished:
                    return [latest[job_id] for job_id in ids]
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    still = [latest[job_id] for job_id in sorted(unfinished)]
                    raise JobTimeoutError(_unfinished_message(still, len(latest), timeout))
                if self._finishes.listening:  # completion events wake us; a full read each second is the safety net
                    delay = min(remaining, max(0.0, next_full_read - now))
                else:
                    delay = backoff.next_delay(limit=remaining)
                await watch.wait_at_most(delay)
                published = watch.take() & unfinished
                if published and self._finishes.listening and time.monotonic() < next_full_read:
                    to_read = sorted(published)  # only what was published finished since the last read
                else:
                    to_read = sorted(unfinished)
                    next_full_read = time.monotonic() + _SAFETY_POLL_S

    async def _read_jobs(self, job_ids: Sequence[str], tenant: str | None) -> list[Job]:
        """``job_ids``' jobs, read as :meth:`get` reads them (without ``waiting_for``) but many at a time.

        The state records in one pipelined round trip; the rows of every job not queued or running in
        one statement. Raises :class:`JobNotFoundError` for an unknown id or another tenant's job.
        """
        if not job_ids:
            return []
        states = await read_states(self.redis, self.keys, job_ids)
        settled_ids = [job_id for job_id, state in zip(job_ids, states, strict=True) if live_job(job_id, state) is None]
        rows = await self._store.get_many(settled_ids)
        return [
            check_tenant(live_job(job_id, state) or settled_job(job_id, state, rows.get(job_id)), tenant)
            for job_id, state in zip(job_ids, states, strict=True)
        ]

    # Cancelling ------------------------------------------------------------------------------

    async def cancel(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Cancel a job and return its state.

        A queued job is cancelled at once (the worker skips it). A running job stays
        ``running`` until the worker running it aborts it in the engine and records it as
        ``cancelled`` (or it finishes first). Cancelling a cancelled job is a no-op. Raises
        :class:`JobNotCancellableError` for a job that already succeeded or failed, and
        :class:`JobNotFoundError` for an unknown id (or another tenant's).
        """
        job_id = parse_job_id(job_id)
        if tenant is not None:
            await self.get(job_id, tenant=tenant)  # ownership first: nothing is written for another tenant
        outcome = await self.submitter.cancel(job_id)
        row = await self._store.get(job_id) if outcome is CancelOutcome.MISSING else None
        refuse_cancel(job_id, outcome, row)
        return await self.get(job_id)

    async def cancel_many(self, job_ids: Sequence[str]) -> None:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are."""
        await self.submitter.cancel_many(job_ids)

    # Runs and documents ----------------------------------------------------------------------

    async def submit_run(
        self,
        path: str | Path,
        *,
        source_lang: str | None = None,
        target_lang: str | None = None,
        name: str | None = None,
        callback_url: str | None = None,
        on_chunk: ChunkCallback | None = None,
        run_id: str | None = None,
        model: str | None = None,
    ) -> str:
        """Submit a JSONL run (``custom_id`` and ``text`` per line); return the run id.

        ``source_lang`` and ``target_lang`` are those of lines that name none; ``source_lang="auto"`` has each
        such line's job detect its own language (its ``detected_source_lang``), as a job sent with ``auto`` does.
        ``model`` names the served model of lines that name none (a line's own ``model`` wins;
        without either the deployment's routes choose); a model nobody serves raises
        :class:`~contract.errors.ModelNotFoundError` before anything is submitted.

        Every line is validated first: a bad line raises :class:`InvalidRunFileError` (listing
        the bad lines) and nothing is submitted. ``on_chunk(submitted, total)`` reports progress.
        With ``run_id`` (a UUID of the caller's) submitting is idempotent: calling again with the
        same file and id after a crash or an outage adds only the jobs still missing.
        """
        return await self.groups.submit_run(
            Path(path),
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            on_chunk=on_chunk,
            run_id=run_id,
            model=model,
        )

    async def get_run(self, run_id: str, *, tenant: str | None = None) -> GroupProgress:
        """A run's status, counts per status, rate and estimated time left."""
        return await self.groups.progress("run", run_id, tenant)

    async def iter_run_results(
        self,
        run_id: str,
        *,
        allow_partial: bool = False,
        tenant: str | None = None,
        flagged: bool | str | Iterable[str] = False,
    ) -> AsyncIterator[dict[str, Any]]:
        """One dict per input line, in input order: ``custom_id`` with ``translation`` or ``error``, and
        ``quality_flags`` for a checked translation (``{}`` when clean).

        ``flagged``: ``True`` keeps only the lines whose quality checks found something (the progress's
        ``counts.flagged``); flag names (``"numbers,tags"`` or a list) keep those with any of them; an
        unknown name raises :class:`~contract.quality.UnknownQualityFlagError`.
        Raises :class:`RunNotFinishedError` (before the first line) while jobs are pending, unless
        ``allow_partial``.
        """
        chosen = parse_flag_filter(flagged)
        return await self.groups.results(run_id, allow_partial=allow_partial, tenant=tenant, flagged=chosen)

    async def cancel_run(self, run_id: str, *, tenant: str | None = None) -> GroupProgress:
        """Cancel the run's jobs that have not finished."""
        return await self.groups.cancel("run", run_id, tenant)

    async def submit_document(
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
        tenant: str | None = None,
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

        ``text`` is the file's text, or for a ``.docx`` its bytes as base64
        (``contract.documents.encode_document``). ``retranslate``: a ``.po`` or XLIFF file's entries
        that already have a translation are translated again (by default they are kept).
        """
        return await self.groups.submit_document(
            text,
            fmt,
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            max_segment_chars=max_segment_chars,
            retranslate=retranslate,
            tenant=tenant,
            model=model,
            glossary=glossary,
            context=context,
            formality=formality,
        )

    async def get_document(self, document_id: str, *, tenant: str | None = None) -> GroupProgress:
        """A document's status and segment counts."""
        return await self.groups.progress("document", document_id, tenant)

    async def document_result(self, document_id: str, *, tenant: str | None = None) -> DocumentResult:
        """The assembled document and its failed segments (raises while it is not assembled)."""
        return await self.groups.document_result(document_id, tenant)

    async def cancel_document(self, document_id: str, *, tenant: str | None = None) -> GroupProgress:
        """Cancel the document's segments that have not finished."""
        return await self.groups.cancel("document", document_id, tenant)
