"""Housekeeping of the consumer group, every ``reclaim_interval_seconds``: keep our own jobs alive,
forget dead consumers, trim what every group has acknowledged (``broker.pending`` does each).

Reclaiming stale and orphaned jobs is the reader's (``worker.consumer``), with its free slots.
The job's attempt counter (in its state record) grows with each start, so a job that kills every
worker that runs it is failed and dead-lettered after ``max_attempts`` instead of circling forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.heartbeats import HEARTBEAT_INTERVAL_S, HEARTBEAT_TTL_S
from broker.keys import served_keys
from broker.pending import forget_gone_consumers, keep_alive, trim_acknowledged
from contract.schemas import Lane
from contract.settings import Settings

log = logging.getLogger(__name__)

__all__ = ["HEARTBEAT_INTERVAL_S", "HEARTBEAT_TTL_S", "Housekeeper"]


class Housekeeper:
    """The worker's background task that runs the functions above every ``reclaim_interval_seconds``."""

    def __init__(
        self,
        settings: Settings,
        redis: aioredis.Redis,
        consumer_name: str,
        held_entries: Callable[[], Iterable[tuple[Lane, str]]],
    ) -> None:
        self._settings = settings
        self._keys = served_keys(settings)
        self._redis = redis
        self._consumer_name = consumer_name
        self._held = held_entries
        self.trimmed = 0

    async def run(self) -> None:
        """Loop until cancelled; Redis errors are logged and retried at the next tick."""
        while True:
            await asyncio.sleep(self._settings.reclaim_interval_seconds)
            try:
                await self.tick()
            except (RedisConnectionError, RedisTimeoutError, ResponseError) as exc:
                log.warning("housekeeping skipped this round: %s", exc)
            except Exception:  # a bug here must not silently end reclaiming for good
                log.exception("housekeeping failed this round")

    async def tick(self) -> None:
        """One round: keep our jobs alive, forget gone consumers, trim (reclaiming is the reader's job)."""
        settings, keys = self._settings, self._keys
        # Refreshed at half the visibility timeout: long before anyone may reclaim them.
        refresh_after_ms = int(settings.visibility_timeout_seconds * 1000 / 2)
        held = list(self._held())
        gone_after_ms = int(settings.consumer_gone_seconds * 1000)
        for lane, stream in keys.lanes:  # first, so that nothing below can keep a lane's jobs from it
            ids = [entry_id for held_lane, entry_id in held if held_lane is lane]
            await keep_alive(self._redis, keys, self._consumer_name, ids, refresh_after_ms, stream)
        for lane, stream in keys.lanes:
            try:
                await forget_gone_consumers(self._redis, keys, self._consumer_name, gone_after_ms, stream)
                self.trimmed += await trim_acknowledged(self._redis, keys, stream)
            except ResponseError as exc:  # one lane's refusal (say, an ACL) must not stop the other's
                log.warning("housekeeping of the %s lane skipped this round: %s", lane.value, exc)
