"""Housekeeping of the consumer group: reclaim stale jobs, keep our own alive, forget dead consumers, trim.

Redis Streams deliver at least once: an entry stays pending until it is acknowledged. If the
worker holding it dies, nobody acknowledges it; :func:`claim_stale` (called by the reader with
its free slots) takes over entries idle longer than the visibility timeout with ``XAUTOCLAIM``.
The job's attempt counter (in its state record) grows with each start, so a job that kills
every worker that runs it is failed and dead-lettered after ``max_attempts`` instead of
circling forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contract.keys import RedisKeys
from contract.settings import Settings

log = logging.getLogger(__name__)

_MAX_CLAIM = 256


async def claim_stale(
    redis: aioredis.Redis, keys: RedisKeys, consumer_name: str, min_idle_ms: int, count: int
) -> list[tuple[str, dict[str, str]]]:
    """Take over up to ``count`` entries idle longer than ``min_idle_ms``, from any consumer.

    Entries whose message was deleted meanwhile are acknowledged (there is nothing left to run).
    """
    response: Any = await redis.xautoclaim(
        keys.jobs_stream, keys.consumer_group, consumer_name, min_idle_ms, start_id="0-0", count=count
    )
    claimed = list(response[1])
    gone = [entry_id for entry_id, fields in claimed if not fields]
    if gone:
        await redis.xack(keys.jobs_stream, keys.consumer_group, *gone)
    entries = [(entry_id, fields) for entry_id, fields in claimed if fields]
    if entries:
        log.info("reclaimed %d jobs idle for more than %.0fs", len(entries), min_idle_ms / 1000)
    return entries


async def keep_alive(redis: aioredis.Redis, keys: RedisKeys, consumer_name: str, entry_ids: list[str]) -> None:
    """Reset the idle time of entries this worker still holds, so nobody reclaims them meanwhile.

    A job that is still generating, or whose result waits for PostgreSQL to come back, is not
    stale; without this, a long outage would make every other worker redo it.
    """
    if entry_ids:
        ids: list[Any] = list(entry_ids)
        await redis.xclaim(keys.jobs_stream, keys.consumer_group, consumer_name, 0, ids, justid=True)


async def forget_gone_consumers(redis: aioredis.Redis, keys: RedisKeys, own_name: str, gone_after_ms: int) -> list[str]:
    """Delete consumers idle longer than ``gone_after_ms`` that hold nothing; return their names."""
    removed = []
    for info in await redis.xinfo_consumers(keys.jobs_stream, keys.consumer_group):
        name = _text(info["name"])
        if name != own_name and int(info["pending"]) == 0 and int(info["idle"]) > gone_after_ms:
            await redis.xgroup_delconsumer(keys.jobs_stream, keys.consumer_group, name)
            removed.append(name)
    if removed:
        log.info("removed %d consumers gone for a long time: %s", len(removed), ", ".join(removed))
    return removed


async def trim_acknowledged(redis: aioredis.Redis, keys: RedisKeys) -> int:
    """Delete jobs-stream entries every consumer group has read and acknowledged; return how many.

    Nothing newer than a group's oldest pending entry, or not yet delivered to it, is touched.
    """
    groups = await redis.xinfo_groups(keys.jobs_stream)
    if not groups:
        return 0
    floors = []
    for group in groups:
        name = _text(group["name"])
        summary: Any = await redis.xpending(keys.jobs_stream, name)
        if summary["pending"]:
            floors.append(_parse_id(_text(summary["min"])))
        else:
            ms, seq = _parse_id(_text(group["last-delivered-id"]))
            floors.append((ms, seq + 1))
    ms, seq = min(floors)
    if (ms, seq) <= (0, 1):
        return 0
    return int(await redis.xtrim(keys.jobs_stream, minid=f"{ms}-{seq}", approximate=False))


class Housekeeper:
    """The worker's background task that runs the functions above every ``reclaim_interval_seconds``."""

    def __init__(
        self,
        settings: Settings,
        redis: aioredis.Redis,
        consumer_name: str,
        held_entry_ids: Callable[[], Iterable[str]],
    ) -> None:
        self._settings = settings
        self._keys = RedisKeys.from_settings(settings)
        self._redis = redis
        self._consumer_name = consumer_name
        self._held = held_entry_ids
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
        await keep_alive(self._redis, keys, self._consumer_name, list(self._held()))
        await forget_gone_consumers(self._redis, keys, self._consumer_name, int(settings.consumer_gone_seconds * 1000))
        self.trimmed += await trim_acknowledged(self._redis, keys)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parse_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)
