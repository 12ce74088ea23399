"""A snapshot of the queue: per lane stream length, group lag (staged tenants' jobs included) and pending;
throughput, dead letters; in total and per shard.

``dragoman stats`` prints it and the worker's ``/metrics`` exports it as gauges; both read it
with the few cheap commands below (no scan of the stream).

With ``DRAGOMAN_REDIS_SHARDS`` > 1 every shard (:attr:`broker.keys.RedisKeys.shards`) is read, the
shards concurrently: each command names one shard's keys only (the per-second counters of one
shard in one ``MGET``), so it runs on a Redis Cluster. :class:`QueueStats` keeps the totals where
it always had them (``lanes`` holds each model's lane summed over the shards) and adds each
shard's own numbers in ``shards``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from broker.heartbeats import read_heartbeats
from broker.keys import RedisKeys
from broker.model_registry import read_served_names
from broker.scripts import CountAfterScript

THROUGHPUT_WINDOW_S = 60
# Before Redis 7, XINFO GROUPS has no lag: it is counted on the server, up to this many entries.
LAG_COUNT_LIMIT = 100_000
_COUNT_AFTER = CountAfterScript()


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    """One consumer of the group: what it holds and how long since it last read or acked."""

    name: str
    pending: int
    idle_seconds: float


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """A live worker's heartbeat (see :meth:`broker.keys.RedisKeys.worker`).

    ``lane_policy`` is what it reads from each lane (``shared``, ``interactive`` or ``bulk``;
    None for a worker of a version that does not say); ``engine`` its engine's settings and where each
    came from (``graphs(default) seqs=256(default) mem=0.3(engine group) in_flight=512(default)``; None
    for the echo engine, or a worker of a version that does not say).
    """

    name: str
    in_flight: int
    written: int
    reclaimed: int
    lane_policy: str | None = None
    models: tuple[str, ...] = ()  # the names it serves, its model first (none: a worker of an older version)
    engine: str | None = None


@dataclass(frozen=True, slots=True)
class LaneStats:
    """One lane's stream (interactive or bulk) of one served model: its backlog as the consumer group sees it.

    ``lag`` is the number of entries no consumer has read yet (``None`` where Redis 7 cannot
    tell, after entries were deleted from the middle of the stream; counted up to
    ``LAG_COUNT_LIMIT``, with ``lag_capped``, on older Redis); ``pending`` the entries read and
    not acknowledged yet; ``oldest_waiting_age_seconds`` how long the next entry to be read has
    been waiting (the lane's queueing delay now; ``None`` when nothing waits). ``staged`` is the
    tenants' jobs waiting in the lane's staging streams (fair share, ``broker.fair_share``), not in
    the stream yet: ``lag`` counts them too, so nothing waiting is invisible.
    """

    lane: str
    stream: str
    length: int
    lag: int | None
    lag_capped: bool
    pending: int
    oldest_pending_age_seconds: float | None
    group_exists: bool
    oldest_waiting_age_seconds: float | None = None
    model: str = ""
    staged: int = 0
    shard: int | None = None  # the shard of this lane's stream; None: every shard's together (QueueStats.lanes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return vars_of(self)


@dataclass(frozen=True, slots=True)
class ShardStats:
    """One shard's part of the queue: its lanes (every served model's), dead letters and throughput.

    ``lag`` is ``None`` when any of its lanes' is unknown; ``lanes`` are this shard's streams, each
    with ``shard`` set.
    """

    shard: int
    length: int
    lag: int | None
    lag_capped: bool
    pending: int
    staged: int
    oldest_pending_age_seconds: float | None
    finished_last_minute: int
    dead_letters: int
    lanes: list[LaneStats] = field(default_factory=list)

    @property
    def jobs_per_second(self) -> float:
        """Jobs finished per second on this shard over the last minute."""
        return self.finished_last_minute / THROUGHPUT_WINDOW_S

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "shard": self.shard,
            "length": self.length,
            "lag": self.lag,
            "lag_capped": self.lag_capped,
            "pending": self.pending,
            "staged": self.staged,
            "oldest_pending_age_seconds": self.oldest_pending_age_seconds,
            "finished_last_minute": self.finished_last_minute,
            "jobs_per_second": round(self.jobs_per_second, 3),
            "dead_letters": self.dead_letters,
            "lanes": [lane.to_dict() for lane in self.lanes],
        }


@dataclass(frozen=True, slots=True)
class QueueStats:
    """What the queue looks like at ``taken_at``: every served model's lanes together, and each in ``lanes``.

    ``stream`` names the default model's interactive lane's stream (the others are in ``lanes``,
    each with its model); ``models`` lists the models covered, the default first; ``lag`` is
    ``None`` when any lane's is unknown; consumers' ``pending`` counts every lane. Every number
    counts every shard; ``lanes`` holds one entry per model and lane (its shards summed, named by
    shard 0's stream), and ``shards`` each shard's own numbers (one entry with one shard).
    """

    taken_at: float
    stream: str
    group: str
    length: int
    lag: int | None
    lag_capped: bool
    pending: int
    oldest_pending_age_seconds: float | None
    finished_last_minute: int
    dead_letters: int
    group_exists: bool
    consumers: list[ConsumerStats] = field(default_factory=list)
    workers: list[WorkerStats] = field(default_factory=list)
    lanes: list[LaneStats] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    shards: list[ShardStats] = field(default_factory=list)

    @property
    def shard_count(self) -> int:
        """How many shards the snapshot covers (``DRAGOMAN_REDIS_SHARDS``)."""
        return max(1, len(self.shards))

    def model_lanes(self, model: str) -> list[LaneStats]:
        """The lanes of one model."""
        return [lane for lane in self.lanes if lane.model == model]

    @property
    def jobs_per_second(self) -> float:
        """Jobs finished per second over the last minute."""
        return self.finished_last_minute / THROUGHPUT_WINDOW_S

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (``dragoman stats --json``)."""
        return {
            "taken_at": self.taken_at,
            "stream": self.stream,
            "group": self.group,
            "length": self.length,
            "lag": self.lag,
            "lag_capped": self.lag_capped,
            "pending": self.pending,
            "oldest_pending_age_seconds": self.oldest_pending_age_seconds,
            "finished_last_minute": self.finished_last_minute,
            "jobs_per_second": round(self.jobs_per_second, 3),
            "dead_letters": self.dead_letters,
            "group_exists": self.group_exists,
            "consumers": [vars_of(c) for c in self.consumers],
            "workers": [vars_of(w) for w in self.workers],
            "lanes": [lane.to_dict() for lane in self.lanes],
            "models": self.models,
            "shard_count": self.shard_count,
            "shards": [shard.to_dict() for shard in self.shards],
        }


def vars_of(item: ConsumerStats | WorkerStats | LaneStats) -> dict[str, Any]:
    """A slotted dataclass as a dict."""
    return {name: _plain(getattr(item, name)) for name in item.__slots__}


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


async def read_queue_stats(
    redis: aioredis.Redis, keys: RedisKeys, *, models: Iterable[str] = (), with_workers: bool = True
) -> QueueStats:
    """Read the queue's numbers from Redis (a handful of O(1)/O(consumers) commands per lane and shard).

    Covers every shard of ``keys`` (read concurrently, each command on one shard's keys), the
    default model, every model a worker has registered (``broker.model_registry``) and ``models``
    (say, those the routing rules name).
    """
    now = time.time()
    registered = set((await read_served_names(redis, keys))[0].values())
    covered = [keys.default_model, *sorted((registered | set(models)) - {keys.default_model})]
    read = await asyncio.gather(*(_read_shard(redis, shard, covered, now) for shard in keys.shards))
    shards = [shard for shard, _ in read]
    consumers: dict[str, ConsumerStats] = {}
    for _, shard_consumers in read:
        for consumer in shard_consumers:
            seen = consumers.get(consumer.name)
            consumers[consumer.name] = consumer if seen is None else _merged(seen, consumer)
    lanes = [
        _summed([shard.lanes[at] for shard in shards], keys.shard_count)
        for at in range(len(shards[0].lanes) if shards else 0)
    ]
    ages = [shard.oldest_pending_age_seconds for shard in shards if shard.oldest_pending_age_seconds is not None]
    lags = [shard.lag for shard in shards]
    return QueueStats(
        taken_at=now,
        stream=keys.default_jobs_stream,
        group=keys.consumer_group,
        length=sum(shard.length for shard in shards),
        lag=None if None in lags else sum(lag for lag in lags if lag is not None),
        lag_capped=any(shard.lag_capped for shard in shards),
        pending=sum(shard.pending for shard in shards),
        oldest_pending_age_seconds=max(ages) if ages else None,
        finished_last_minute=sum(shard.finished_last_minute for shard in shards),
        dead_letters=sum(shard.dead_letters for shard in shards),
        group_exists=any(lane.group_exists for lane in lanes),
        consumers=sorted(consumers.values(), key=lambda c: c.name),
        workers=await _read_workers(redis, keys) if with_workers else [],
        lanes=lanes,
        models=covered,
        shards=shards,
    )


async def _read_shard(
    redis: aioredis.Redis, keys: RedisKeys, models: list[str], now: float
) -> tuple[ShardStats, list[ConsumerStats]]:
    """One shard's numbers (``keys`` are its names) and the consumers of its lanes (one entry per lane each)."""
    second = int(now)
    # Concurrently, not pipelined: redis-py refuses MGET in a cluster pipeline. One shard's counters share its hash
    # tag, so the MGET is one slot (one node) on a cluster.
    dead, finished = await asyncio.gather(
        redis.xlen(keys.dead_letter_stream),
        redis.mget([keys.finished_in_second(s) for s in range(second - THROUGHPUT_WINDOW_S + 1, second + 1)]),
    )
    streams = [(model, lane.value, stream) for model in models for lane, stream in keys.for_model(model).lanes]
    lanes, consumers = await _read_lanes(redis, keys, streams, now)
    ages = [lane.oldest_pending_age_seconds for lane in lanes if lane.oldest_pending_age_seconds is not None]
    lags = [lane.lag for lane in lanes]
    stats = ShardStats(
        shard=keys.shard,
        length=sum(lane.length for lane in lanes),
        lag=None if None in lags else sum(lag for lag in lags if lag is not None),
        lag_capped=any(lane.lag_capped for lane in lanes),
        pending=sum(lane.pending for lane in lanes),
        staged=sum(lane.staged for lane in lanes),
        oldest_pending_age_seconds=max(ages) if ages else None,
        finished_last_minute=sum(int(n) for n in finished if n is not None),
        dead_letters=int(dead),
        lanes=lanes,
    )
    return stats, consumers


def _summed(lanes: list[LaneStats], shard_count: int) -> LaneStats:
    """One model's lane over every shard (``lanes``: its stream on each shard, shard 0 first).

    With one shard it is that shard's lane as it always was (``shard`` None all the same).
    """
    first = lanes[0]
    if shard_count == 1:
        return replace(first, shard=None)
    lags = [lane.lag for lane in lanes]
    pending_ages = [lane.oldest_pending_age_seconds for lane in lanes if lane.oldest_pending_age_seconds is not None]
    waiting_ages = [lane.oldest_waiting_age_seconds for lane in lanes if lane.oldest_waiting_age_seconds is not None]
    return LaneStats(
        lane=first.lane,
        stream=first.stream,
        length=sum(lane.length for lane in lanes),
        lag=None if None in lags else sum(lag for lag in lags if lag is not None),
        lag_capped=any(lane.lag_capped for lane in lanes),
        pending=sum(lane.pending for lane in lanes),
        oldest_pending_age_seconds=max(pending_ages) if pending_ages else None,
        group_exists=any(lane.group_exists for lane in lanes),
        oldest_waiting_age_seconds=max(waiting_ages) if waiting_ages else None,
        model=first.model,
        staged=sum(lane.staged for lane in lanes),
        shard=None,
    )


@dataclass(slots=True)
class _LaneRead:
    """What the first round trip said of one lane: what the second one asks about it."""

    model: str
    lane: str
    stream: str
    length: int
    group: dict[str, Any] | None
    consumers: list[ConsumerStats]
    tenants: list[str]


async def _read_lanes(
    redis: aioredis.Redis, keys: RedisKeys, streams: list[tuple[str, str, str]], now: float
) -> tuple[list[LaneStats], list[ConsumerStats]]:
    """The lanes ``streams`` (model, lane, stream) of one shard and their consumers, in two pipelined round trips.

    The first asks each lane's length, groups, consumers and staging rotation; the second, what those
    answers lead to: the oldest pending entry, the next entry to be read, each staging stream's length.
    Every key is the shard's (one slot on a cluster, where a pipeline goes node by node).
    """
    async with redis.pipeline(transaction=False) as pipe:
        for _, _, stream in streams:
            pipe.xlen(stream)
            pipe.xinfo_groups(stream)
            pipe.xinfo_consumers(stream, keys.consumer_group)
            pipe.lrange(keys.rotation(stream), 0, -1)
        first: list[Any] = await pipe.execute(raise_on_error=False) if streams else []
    reads = [
        _first_read(model, lane, stream, keys.consumer_group, first[4 * at : 4 * at + 4])
        for at, (model, lane, stream) in enumerate(streams)
    ]
    asked = 0
    async with redis.pipeline(transaction=False) as pipe:
        for read in reads:
            if read.group is not None and int(read.group.get("pending") or 0):
                pipe.xpending_range(read.stream, keys.consumer_group, min="-", max="+", count=1)
                asked += 1
            if read.length:
                after = "-" if read.group is None else "(" + _text(read.group["last-delivered-id"])
                pipe.xrange(read.stream, min=after, max="+", count=1)
                asked += 1
            for tenant in read.tenants:
                pipe.xlen(keys.staging(read.stream, tenant))
                asked += 1
        second: list[Any] = await pipe.execute() if asked else []
    # Redis 7 reports each group's lag in XINFO GROUPS; only older servers need the counting script (concurrently).
    lags = await asyncio.gather(*(_group_lag(redis, read.stream, read.group, read.length) for read in reads))
    replies = iter(second)
    lanes = []
    for read, (lag, capped) in zip(reads, lags, strict=True):
        oldest_age = waiting_age = None
        pending = int(read.group.get("pending") or 0) if read.group is not None else 0
        if pending:
            oldest = next(replies)
            if oldest:
                oldest_age = max(0.0, now - int(_text(oldest[0]["message_id"]).split("-")[0]) / 1000)
        if read.length:
            waiting = next(replies)
            if waiting:
                waiting_age = max(0.0, now - int(_text(waiting[0][0]).split("-")[0]) / 1000)
        staged = sum(int(next(replies)) for _ in read.tenants)
        lanes.append(
            LaneStats(
                lane=read.lane,
                stream=read.stream,
                length=read.length,
                lag=None if lag is None else lag + staged,
                lag_capped=capped,
                pending=pending,
                oldest_pending_age_seconds=oldest_age,
                group_exists=read.group is not None,
                oldest_waiting_age_seconds=waiting_age,
                model=read.model,
                staged=staged,
                shard=keys.shard,
            )
        )
    return lanes, [consumer for read in reads for consumer in read.consumers]


def _first_read(model: str, lane: str, stream: str, group_name: str, replies: list[Any]) -> _LaneRead:
    """One lane's replies to the first round trip: XLEN, XINFO GROUPS, XINFO CONSUMERS, LRANGE of its rotation.

    The two XINFO fail for a stream or a group that does not exist yet: no group, no consumers.
    """
    length, groups, consumers, tenants = replies
    for reply in (length, tenants):
        if isinstance(reply, Exception):
            raise reply
    group = None
    if not isinstance(groups, Exception):
        group = next((g for g in groups if _text(g.get("name")) == group_name), None)
    elif not isinstance(groups, ResponseError):
        raise groups
    read = _LaneRead(model, lane, stream, int(length), group, [], [_text(tenant) for tenant in tenants])
    if group is not None:
        if isinstance(consumers, Exception):
            raise consumers
        read.consumers = [
            ConsumerStats(name=_text(info["name"]), pending=int(info["pending"]), idle_seconds=int(info["idle"]) / 1000)
            for info in consumers
        ]
    return read


def _merged(one: ConsumerStats, other: ConsumerStats) -> ConsumerStats:
    """A consumer seen in several lanes or shards: what it holds in all, idle since its latest read in any."""
    return ConsumerStats(
        name=one.name, pending=one.pending + other.pending, idle_seconds=min(one.idle_seconds, other.idle_seconds)
    )


async def _group_lag(
    redis: aioredis.Redis, stream: str, group: dict[str, Any] | None, length: int
) -> tuple[int | None, bool]:
    """The group's lag and whether it was capped: Redis 7 reports it; older servers get it counted."""
    if group is None:
        return length, False  # nobody has read anything yet
    if "lag" in group:
        return (None if group["lag"] is None else int(group["lag"])), False
    counted = await _COUNT_AFTER.call(redis, stream, _text(group["last-delivered-id"]), LAG_COUNT_LIMIT)
    return counted, counted >= LAG_COUNT_LIMIT


async def _read_workers(redis: aioredis.Redis, keys: RedisKeys) -> list[WorkerStats]:
    return [
        WorkerStats(
            name=name,
            in_flight=int(beat.get("in_flight", 0)),
            written=int(beat.get("written", 0)),
            reclaimed=int(beat.get("reclaimed", 0)),
            lane_policy=beat.get("lane_policy") or None,
            models=tuple(beat.get("models", "").split()),
            engine=beat.get("engine") or None,
        )
        for name, beat in sorted((await read_heartbeats(redis, keys)).items())
    ]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
