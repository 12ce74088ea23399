"""What every orchestration task needs: settings, service URLs, keys, connections."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import redis

from broker.keys import RedisKeys
from broker.orchestration import (
    enqueue_orchestration,
    open_rq_connection,
    orchestration_redis_url,
    tenant_concurrency,
)
from contract.orchestration import OrchestratorTask
from contract.settings import Settings
from storage import AsyncConnectionPool, GroupStore
from storage.embedded import resolve_urls


@dataclass(frozen=True, slots=True)
class TaskContext:
    """Resolved once per task from the RQ worker's environment (``DRAGOMAN_*``).

    ``redis_url`` is the queue's Redis (a single server or a cluster: the jobs, their groups'
    records, the completions streams); ``orchestration_redis_url`` the single server RQ's queues
    live on (``DRAGOMAN_ORCHESTRATION_REDIS_URL``, by default the queue's when that is one server).
    """

    settings: Settings
    redis_url: str
    database_url: str
    keys: RedisKeys
    orchestration_redis_url: str

    @classmethod
    def from_environment(cls) -> TaskContext:
        """The context of this process's settings.

        Raises :class:`~contract.errors.ConfigurationError` if the queue's Redis is a cluster and
        ``DRAGOMAN_ORCHESTRATION_REDIS_URL`` is unset (RQ needs a single server).
        """
        settings = Settings()
        urls = resolve_urls(settings)
        keys = RedisKeys.from_settings(settings)
        return cls(settings, urls.redis_url, urls.database_url, keys, orchestration_redis_url(settings, urls.redis_url))

    @asynccontextmanager
    async def group_store(self) -> AsyncIterator[GroupStore]:
        """The runs and documents on connections of this task's own, closed when the block ends."""
        pool = AsyncConnectionPool(self.database_url, max_connections=2)
        try:
            yield GroupStore(pool)
        finally:
            await pool.close()

    def rq_connection(self) -> redis.Redis:
        """A connection to RQ's Redis (:attr:`orchestration_redis_url`), as RQ needs it (bytes, not decoded)."""
        return open_rq_connection(self.orchestration_redis_url)

    def enqueue(self, task: OrchestratorTask, *args: str, tenant: str | None = None) -> None:
        """Queue orchestration work (``broker.orchestration.enqueue_orchestration``) on a connection of its own,
        in ``tenant``'s turn if the work is a tenant's."""
        connection = self.rq_connection()
        try:
            enqueue_orchestration(
                connection,
                self.keys,
                task,
                *args,
                webhook_retry_seconds=self.settings.webhook_retry_seconds,
                tenant=tenant,
                tenant_concurrency=tenant_concurrency(self.settings, task),
            )
        finally:
            connection.close()
