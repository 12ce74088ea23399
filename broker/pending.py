"""The consumer group's pending entries: take over stale and orphaned ones, keep our own alive, forget
dead consumers, trim what every group has acknowledged.

Redis Streams deliver at least once: an entry stays pending until it is acknowledged. If the
worker holding it dies, nobody acknowledges it; :func:`claim_stale` (called by the reader with
its free slots) takes over entries idle longer than the visibility timeout with ``XAUTOCLAIM``,
walking the pending list with a cursor kept between calls (``XAUTOCLAIM`` looks at no more than
ten entries per claimable one, so starting over each time never reaches stale entries that sit
behind many live ones).

A worker that died is known sooner than that: :func:`claim_orphans` takes over the entries of a
consumer whose heartbeat (``broker.heartbeats``) is gone as soon as they have been idle for one
heartbeat TTL. The worker's ``Housekeeper`` (``worker/reclaim.py``) runs the others every
``reclaim_interval_seconds``.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import redis.asyncio as aioredis

from broker.heartbeats import beating
from broker.keys import RedisKeys

log = logging.getLogger(__name__)

_PENDING_PAGE = 1_000


class Claimed(NamedTuple):
    """What one :func:`claim_stale` took over, and where the next call goes on from."""

    next_start: str
    entries: list[tuple[str, dict[str, str]]]


async def claim_stale(
    redis: aioredis.Redis,
    keys: RedisKeys,
    consumer_name: str,
    min_idle_ms: int,
    count: int,
    start: str = "0-0",
    stream: str | None = None,
) -> Claimed:
    """Take over up to ``count`` entries of ``stream`` (default: the interactive lane) idle longer
    than ``min_idle_ms``, from any consumer.

    The scan begins at ``start`` (pass the last call's ``next_start``; it is ``0-0`` again once
    the whole pending list was walked). Entries whose message was deleted meanwhile are
    acknowledged (there is nothing left to run).
    """
    stream = stream or keys.jobs_stream
    response: Any = await redis.xautoclaim(
        stream, keys.consumer_group, consumer_name, min_idle_ms, start_id=start, count=count
    )
    claimed = list(response[1])
    gone = [entry_id for entry_id, fields in claimed if not fields]
    if gone:
        await redis.xack(stream, keys.consumer_group, *gone)
    entries = [(entry_id, fields) for entry_id, fields in claimed if fields]
    if entries:
        log.info("reclaimed %d jobs idle for more than %.0fs", len(entries), min_idle_ms / 1000)
    return Claimed(_text(response[0]), entries)


async def claim_orphans(
    redis: aioredis.Redis,
    keys: RedisKeys,
    consumer_name: str,
    min_idle_ms: int,
    count: int,
    stream: str | None = None,
) -> list[tuple[str, dict[str, str]]]:
    """Take over up to ``count`` entries of ``stream`` (default: the interactive lane) held by
    consumers whose heartbeat has expired.

    Such a consumer's worker is dead (killed, its host gone), so its entries need not wait for
    the visibility timeout. ``min_idle_ms`` (one heartbeat TTL) keeps the entries a worker has
    just read before its first heartbeat landed with it, and makes the claim itself safe: an
    entry somebody else has claimed meanwhile has a fresh idle time and is left alone.
    """
    stream, group = stream or keys.jobs_stream, keys.consumer_group
    holders = [
        _text(info["name"])
        for info in await redis.xinfo_consumers(stream, group)
        if int(info["pending"]) > 0 and _text(info["name"]) != consumer_name
    ]
    if not holders:
        return []
    alive = await beating(redis, keys, holders)
    dead = [name for name, beating in zip(holders, alive, strict=True) if not beating]
    ids: list[Any] = []
    for name in dead:
        page: Any = await redis.xpending_range(
            stream, group, min="-", max="+", count=count - len(ids), consumername=name, idle=min_idle_ms
        )
        ids += [_text(p["message_id"]) for p in page]
        if len(ids) >= count:
            break
    if not ids:
        return []
    claimed: Any = await redis.xclaim(stream, group, consumer_name, min_idle_ms, ids)
    entries = [(_text(entry_id), fields) for entry_id, fields in claimed if entry_id is not None and fields]
    returned = {entry_id for entry_id, _ in entries}
    leftover = [entry_id for entry_id in ids if entry_id not in returned]
    if leftover:  # deleted from the stream (claimed, but nothing to run), or claimed by another worker first
        await _ack_deleted(redis, keys, consumer_name, leftover, stream)
    if entries:
        log.info("took over %d jobs from %s, whose heartbeat expired", len(entries), ", ".join(sorted(dead)))
    return entries


async def _ack_deleted(
    redis: aioredis.Redis, keys: RedisKeys, consumer_name: str, entry_ids: list[str], stream: str
) -> None:
    """Acknowledge those of ``entry_ids`` that are pending under ``consumer_name`` now (their entry is gone)."""
    async with redis.pipeline(transaction=False) as pipe:
        for entry_id in entry_ids:
            pipe.xpending_range(
                stream, keys.consumer_group, min=entry_id, max=entry_id, count=1, consumername=consumer_name
            )
        pages = await pipe.execute()
    ours = [entry_id for entry_id, page in zip(entry_ids, pages, strict=True) if page]
    if ours:
        await redis.xack(stream, keys.consumer_group, *ours)


async def keep_alive(
    redis: aioredis.Redis,
    keys: RedisKeys,
    consumer_name: str,
    entry_ids: list[str],
    min_idle_ms: int,
    stream: str | None = None,
) -> list[str]:
    """Reset the idle time of entries this worker still holds, so nobody reclaims them meanwhile; return them.

    A job that is still generating, or whose result waits for PostgreSQL to come back, is not
    stale; without this, a long outage would make every other worker redo it. Only entries
    still pending under this consumer and idle for ``min_idle_ms`` are claimed, with that idle
    check in the ``XCLAIM`` itself: after an outage longer than the visibility timeout, an
    entry another worker has meanwhile reclaimed (its idle time reset by that claim) stays
    with that worker instead of being taken back.
    """
    held = set(entry_ids)
    if not held:
        return []
    stream = stream or keys.jobs_stream
    due: list[str] = []
    start = "-"
    while True:
        page: Any = await redis.xpending_range(
            stream,
            keys.consumer_group,
            min=start,
            max="+",
            count=_PENDING_PAGE,
            consumername=consumer_name,
            idle=min_idle_ms,
        )
        due += [entry_id for entry_id in (_text(p["message_id"]) for p in page) if entry_id in held]
        if len(page) < _PENDING_PAGE:
            break
        start = "(" + _text(page[-1]["message_id"])
    if due:
        ids: list[Any] = due
        await redis.xclaim(stream, keys.consumer_group, consumer_name, min_idle_ms, ids, justid=True)
    return due


async def forget_gone_consumers(
    redis: aioredis.Redis, keys: RedisKeys, own_name: str, gone_after_ms: int, stream: str | None = None
) -> list[str]:
    """Delete consumers of ``stream``'s group idle longer than ``gone_after_ms`` holding nothing; return their names."""
    stream = stream or keys.jobs_stream
    removed = []
    for info in await redis.xinfo_consumers(stream, keys.consumer_group):
        name = _text(info["name"])
        if name != own_name and int(info["pending"]) == 0 and int(info["idle"]) > gone_after_ms:
            await redis.xgroup_delconsumer(stream, keys.consumer_group, name)
            removed.append(name)
    if removed:
        log.info("removed %d consumers gone for a long time: %s", len(removed), ", ".join(removed))
    return removed


async def trim_acknowledged(redis: aioredis.Redis, keys: RedisKeys, stream: str | None = None) -> int:
    """Delete entries of ``stream`` (default: the interactive lane) every consumer group has read and
    acknowledged; return how many.

    Nothing newer than a group's oldest pending entry, or not yet delivered to it, is touched.
    """
    stream = stream or keys.jobs_stream
    groups = await redis.xinfo_groups(stream)
    if not groups:
        return 0
    floors = []
    for group in groups:
        name = _text(group["name"])
        summary: Any = await redis.xpending(stream, name)
        if summary["pending"]:
            floors.append(_parse_id(_text(summary["min"])))
        else:
            ms, seq = _parse_id(_text(group["last-delivered-id"]))
            floors.append((ms, seq + 1))
    ms, seq = min(floors)
    if (ms, seq) <= (0, 1):
        return 0
    return int(await redis.xtrim(stream, minid=f"{ms}-{seq}", approximate=False))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parse_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)
