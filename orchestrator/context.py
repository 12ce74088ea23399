"""What every orchestration task needs: settings, service URLs, keys, connections."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from broker.keys import RedisKeys
from contract.settings import Settings
from storage import GroupStore, PostgresConnection
from storage.embedded import resolve_urls


@dataclass(frozen=True, slots=True)
class TaskContext:
    """Resolved once per task from the RQ worker's environment (``DRAGOMAN_*``)."""

    settings: Settings
    redis_url: str
    database_url: str
    keys: RedisKeys

    @classmethod
    def from_environment(cls) -> TaskContext:
        """The context of this process's settings."""
        settings = Settings()
        urls = resolve_urls(settings)
        return cls(settings, urls.redis_url, urls.database_url, RedisKeys.from_settings(settings))

    @contextmanager
    def group_store(self) -> Iterator[GroupStore]:
        """The runs and documents on a connection of this task's own, closed when the block ends."""
        with PostgresConnection(self.database_url) as connection:
            yield GroupStore(connection)

    def rq_connection(self) -> redis.Redis:
        """A Redis connection as RQ needs it (bytes, not decoded)."""
        return redis.Redis.from_url(self.redis_url)
