"""The asyncio client: :class:`~producer.Client`'s job operations for asyncio applications.

Redis through ``redis.asyncio``, PostgreSQL through psycopg's async connections: no call blocks
the event loop, so a web server (dragoman's own HTTP API included) can serve many requests on
one loop. Validation, lookups and cancel decisions are the functions :class:`Client` uses
(``producer.requests``), and jobs are written by the same scripts (``AsyncJobSubmitter``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.redis_client import open_redis
from broker.scripts import CancelOutcome
from contract.backoff import Backoff
from contract.errors import JobTimeoutError
from contract.schemas import Job, TranslationRequest
from contract.settings import Settings
from producer.requests import (
    check_tenant,
    live_job,
    parse_job_id,
    prepare,
    prepare_many,
    refuse_cancel,
    settled_job,
)
from producer.submitter import AsyncJobSubmitter
from storage import AsyncConnectionPool, AsyncJobStore

_MAX_POLL_INTERVAL_S = 0.5  # what wait's polling backs off to


class AsyncClient:
    """An asyncio dragoman client: submit, submit_many, get, wait and cancel jobs.

    The same operations, arguments and errors as :class:`~producer.Client` (runs and documents
    are the synchronous client's for now). Give it the services' URLs or :class:`Settings` with
    both set: resolving the embedded servers blocks, so do that before the loop (or use
    ``storage.embedded.resolve_urls`` in a thread). Close it with ``await client.close()`` or
    ``async with``.

    ``tenant`` (every method takes it) scopes a call to one tenant of the HTTP API: jobs are
    submitted as the tenant's, and another tenant's job is answered as not found.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis_url: str | None = None,
        database_url: str | None = None,
        max_connections: int = 8,
    ) -> None:
        self.settings = settings or Settings()
        redis_url = redis_url or self.settings.redis_url
        database_url = database_url or self.settings.database_url
        if redis_url is None or database_url is None:
            from contract.errors import ConfigurationError

            raise ConfigurationError(
                "AsyncClient needs both service URLs (DRAGOMAN_REDIS_URL and DRAGOMAN_DATABASE_URL, or "
                "redis_url= and database_url=); resolve the embedded servers first with storage.embedded.resolve_urls"
            )
        self.keys = RedisKeys.from_settings(self.settings)
        self.redis: aioredis.Redis = open_redis(redis_url, max_connections=max(4, max_connections * 4))
        self._pool = AsyncConnectionPool(database_url, max_connections=max_connections)
        self._store = AsyncJobStore(self._pool)
        self.submitter = AsyncJobSubmitter(self.redis, self.keys, self.settings)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the Redis and PostgreSQL connections."""
        await self.redis.aclose()
        await self._pool.close()

    # Submitting ------------------------------------------------------------------------------

    async def submit(
        self,
        text: str,
        source_lang: str,
        target_lang: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        tenant: str | None = None,
        priority: str | None = None,
        glossary: Mapping[str, str] | None = None,
        context: str | None = None,
        formality: str | None = None,
        memory: bool = True,
    ) -> str:
        """Enqueue one translation and return its job id (see :meth:`producer.Client.submit`)."""
        prepared = prepare(
            self.settings,
            text,
            source_lang,
            target_lang,
            metadata=metadata,
            idempotency_key=idempotency_key,
            tenant=tenant,
            priority=priority,
            glossary=dict(glossary) if isinstance(glossary, Mapping) else glossary,
            context=context,
            formality=formality,
            memory=memory,
        )
        return (await self.submitter.write([prepared]))[0]

    async def submit_many(
        self, items: Iterable[TranslationRequest | Mapping[str, Any]], *, tenant: str | None = None
    ) -> list[str]:
        """Enqueue many translations, pipelined in chunks; return their ids in input order.

        Every item is validated first: one bad item raises (naming its index) and nothing is written.
        If Redis fails after a chunk went in, :class:`~contract.errors.SubmitInterruptedError` names
        what was queued (as :meth:`Client.submit_many <producer.client.Client.submit_many>`).
        """
        return await self.submitter.write(prepare_many(self.settings, items, tenant=tenant))

    # Looking up ------------------------------------------------------------------------------

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        """The job's status, result, error and timings (see :meth:`producer.Client.get`)."""
        job_id = parse_job_id(job_id)
        state: dict[str, str] = await self.redis.hgetall(self.keys.state(job_id))  # type: ignore[assignment]
        job = live_job(job_id, state) or settled_job(job_id, state, await self._store.get(job_id))
        return check_tenant(job, tenant)

    async def wait(
        self,
        job_id: str,
        timeout: float = 60.0,  # noqa: ASYNC109 (the same signature as Client.wait)
        poll_interval: float = 0.05,
        *,
        tenant: str | None = None,
    ) -> Job:
        """Wait (without blocking the loop) until the job is final, and return it.

        Raises :class:`JobTimeoutError` after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        backoff = Backoff(poll_interval, max(poll_interval, _MAX_POLL_INTERVAL_S))
        while True:
            job = await self.get(job_id, tenant=tenant)
            if job.status.is_final:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise JobTimeoutError(
                    f"job {job.id} is still {job.status.value} after {timeout:g}s; "
                    "is a worker running (`dragoman worker`)?"
                )
            await backoff.sleep_async(limit=remaining)

    # Cancelling ------------------------------------------------------------------------------

    async def cancel(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Cancel a job and return its state (see :meth:`producer.Client.cancel` for what that means).

        With a ``tenant``, another tenant's job raises :class:`JobNotFoundError` and is left alone.
        """
        job_id = parse_job_id(job_id)
        if tenant is not None:
            await self.get(job_id, tenant=tenant)  # ownership first: nothing is written for another tenant
        outcome = await self.submitter.cancel(job_id)
        row = await self._store.get(job_id) if outcome is CancelOutcome.MISSING else None
        refuse_cancel(job_id, outcome, row)
        return await self.get(job_id)

    async def cancel_many(self, job_ids: list[str]) -> None:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are."""
        await self.submitter.cancel_many(job_ids)
