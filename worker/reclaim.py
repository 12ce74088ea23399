"""Housekeeping of the consumer group, every ``reclaim_interval_seconds``: keep our own jobs alive,
forget dead consumers, trim what every group has acknowledged (``broker.pending`` does each).

Reclaiming stale and orphaned jobs is the reader's (``worker.consumer``), with its free slots.
With several shards (``DRAGOMAN_REDIS_SHARDS``) every round covers every shard's lanes, each shard on
its own: one whose server fails (its primary failing over) is skipped this round, the others are kept.
The job's attempt counter (in its state record) grows with each start, so a job that kills every
worker that runs it is failed and dead-lettered after ``max_attempts`` instead of circling forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from broker.heartbeats import HEARTBEAT_INTERVAL_S, HEARTBEAT_TTL_S
from broker.keys import RedisKeys, served_keys
from broker.lanes import SHARD_UNAVAILABLE
from broker.pending import forget_gone_consumers, keep_alive, trim_acknowledged
from broker.redis_client import connection_faults_as_errors
from contract.schemas import Lane
from contract.settings import Settings

log = logging.getLogger(__name__)

_SKIPPED: tuple[type[Exception], ...] = (*SHARD_UNAVAILABLE, ResponseError)  # a round's errors: retried next round

__all__ = ["HEARTBEAT_INTERVAL_S", "HEARTBEAT_TTL_S", "Housekeeper"]


class Housekeeper:
    """The worker's background task that runs the functions above every ``reclaim_interval_seconds``."""

    def __init__(
        self,
        settings: Settings,
        redis: aioredis.Redis,
        consumer_name: str,
        held_entries: Callable[[], Iterable[tuple[int, Lane, str]]],
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
            except _SKIPPED as exc:
                log.warning("housekeeping skipped this round: %s", exc)
            except Exception:  # a bug here must not silently end reclaiming for good
                log.exception("housekeeping failed this round")

    async def tick(self) -> None:
        """One round: keep our jobs alive, forget gone consumers, trim (reclaiming is the reader's job), on
        every shard; a shard that fails is logged and skipped, the others are kept (it is retried next round)."""
        held = list(self._held())
        shards = self._keys.shards
        for keys in shards:
            try:
                with connection_faults_as_errors():
                    await self._tick_shard(
                        keys, [(lane, entry_id) for shard, lane, entry_id in held if shard == keys.shard]
                    )
            except SHARD_UNAVAILABLE as exc:
                if len(shards) == 1:
                    raise  # run() logs it, as it always did
                log.warning("housekeeping of shard %d skipped this round: %s", keys.shard, exc)

    async def _tick_shard(self, keys: RedisKeys, held: list[tuple[Lane, str]]) -> None:
        """One shard's round: keep its entries held here alive, then forget gone consumers and trim its lanes."""
        settings = self._settings
        # Refreshed at half the visibility timeout: long before anyone may reclaim them.
        refresh_after_ms = int(settings.visibility_timeout_seconds * 1000 / 2)
        gone_after_ms = int(settings.consumer_gone_seconds * 1000)
        for lane, stream in keys.lanes:  # first, so that nothing below can keep a lane's jobs from it
            ids = [entry_id for held_lane, entry_id in held if held_lane is lane]
            await keep_alive(self._redis, keys, self._consumer_name, ids, refresh_after_ms, stream)
        for lane, stream in keys.lanes:
            try:
                await forget_gone_consumers(self._redis, keys, self._consumer_name, gone_after_ms, stream)
                self.trimmed += await trim_acknowledged(self._redis, keys, stream)
            except SHARD_UNAVAILABLE:
                raise
            except ResponseError as exc:  # one lane's refusal (say, an ACL) must not stop the other's
                log.warning("housekeeping of the %s lane skipped this round: %s", lane.value, exc)
