"""Completion events for ``GET /v1/events``: one tenant's own events stream, resumable by entry id.

**Each tenant's own stream.** FINISH appends every completion to the shared events stream and, for
a job with a tenant, to that tenant's own stream too (``{<prefix>}:tenant:<t>:events``), which is
trimmed by the tenant's own retention: at most ``DRAGOMAN_TENANT_EVENTS_MAXLEN`` entries, none older
than ``DRAGOMAN_TENANT_EVENTS_RETENTION_SECONDS``. The feed reads only those. Before, it read the
shared stream and dropped other tenants' entries as it went: a replay from ``0-0`` re-read the whole
stream (100,000 entries, every tenant's) on every reconnect, and a busy tenant pushed another's
events out of it. Now a replay reads the caller's own events, as many as its retention keeps, and
another tenant's volume changes neither what it reads nor how much. Other designs were weighed: a
bounded scan of the shared stream still reads other tenants' entries, and a time bound alone lets a
busy tenant's own replay grow without end.

Each open stream blocks on ``XREAD`` on a connection of its own, so the feed has its own Redis
connection pool, sized to ``DRAGOMAN_API_MAX_EVENT_STREAMS``: event streams never starve the
request handlers' connections, and a stream past the limit is refused instead of waiting. One
API key holds at most ``DRAGOMAN_API_MAX_EVENT_STREAMS_PER_KEY`` of them, so no key can take
every stream from the others.

**Shards.** FINISH writes each completion on its shard's events stream (``DRAGOMAN_REDIS_SHARDS``),
so a stream follows every shard's: one blocking ``XREAD`` per shard (a read of two shards' streams
is ``CROSSSLOT`` on a Redis Cluster), each a task the stream owns and cancels when it ends. An
event's ``id:`` is then the position in every shard's stream, comma-separated, shard 0 first
(``1700000000000-0,1700000000002-5,0-0``); with one shard it is the plain entry id, as before.
A single entry id given to a feed of several shards resumes every shard after it (entry ids
start with the server's clock in milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import redis.asyncio as aioredis

from broker.events import Entries, newest_event_ids, oldest_event_ids, read_events
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from broker.revocations import is_revoked

BLOCK_MS = 15_000
"""How long one read waits for new entries; a keep-alive comment goes out after each empty wait."""
READ_COUNT = 500
_ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
_MAX_ID_PART = 2**64 - 1  # each half of a stream entry id is an unsigned 64-bit number in Redis


@dataclass(frozen=True, slots=True)
class FeedItem:
    """One server-sent event: a job's completion (``id`` is its stream entry id), a gap, or a keep-alive."""

    kind: str  # "event", "gap" or "keepalive"
    entry_id: str = ""
    data: str = ""

    def encode(self) -> bytes:
        """The event in the ``text/event-stream`` format."""
        if self.kind == "keepalive":
            # A comment, never an id: the position read up to is another tenant's entry, and its
            # id would tell this one when that tenant's jobs finish.
            return b": keep-alive\n\n"
        event = "job.finished" if self.kind == "event" else self.kind
        head = f"id: {self.entry_id}\n" if self.entry_id else ""
        return f"{head}event: {event}\ndata: {self.data}\n\n".encode()


def valid_entry_id(value: str) -> bool:
    """Whether ``value`` is a stream entry id (``<ms>-<seq>``, unsigned 64-bit numbers), as ``Last-Event-ID`` must.

    Twenty digits reach past 2^64, which Redis refuses once the stream has started: checked here.
    """
    if _ENTRY_ID.fullmatch(value) is None:
        return False
    ms, _, seq = value.partition("-")
    return int(ms) <= _MAX_ID_PART and int(seq) <= _MAX_ID_PART


def valid_cursor(value: str, shards: int) -> bool:
    """Whether ``value`` is where a feed of ``shards`` shards can resume: one entry id, or one per shard
    (comma-separated, shard 0 first), each :func:`valid_entry_id`."""
    parts = value.split(",")
    return (len(parts) == 1 or len(parts) == shards) and all(valid_entry_id(part) for part in parts)


def _after(a: str, b: str) -> bool:
    """Whether entry id ``a`` comes after ``b``."""
    ams, _, aseq = a.partition("-")
    bms, _, bseq = b.partition("-")
    return (int(ams), int(aseq)) > (int(bms), int(bseq))


class EventFeed:
    """Reads the events stream for API callers; owns the Redis pool their blocking reads use."""

    def __init__(
        self, redis_url: str, keys: RedisKeys, max_streams: int, max_streams_per_key: int | None = None
    ) -> None:
        self._keys = keys
        self.max_streams = max_streams
        self.open_streams = 0
        self.max_streams_per_key = max_streams if max_streams_per_key is None else max_streams_per_key
        self.open_by_key: dict[str, int] = {}
        self._shards = keys.shards
        # One blocking read per shard per stream, and one for the gap checks and revocation reads.
        self._redis: aioredis.Redis = open_redis(
            redis_url,
            max_connections=max_streams * len(self._shards) + 1,
            socket_timeout=BLOCK_MS / 1000 + 10,
        )

    def take_stream(self, api_key_id: str) -> str | None:
        """Count a stream opening for ``api_key_id``; or which limit refuses it: ``"key"`` or ``"server"``.

        Counted at once (no await between the check and the count), so concurrent requests cannot
        all pass the check. Give it back with :meth:`give_stream`.
        """
        if self.open_by_key.get(api_key_id, 0) >= self.max_streams_per_key:
            return "key"
        if self.open_streams >= self.max_streams:
            return "server"
        self.open_streams += 1
        self.open_by_key[api_key_id] = self.open_by_key.get(api_key_id, 0) + 1
        return None

    def give_stream(self, api_key_id: str) -> None:
        """A stream taken with :meth:`take_stream` ended (or never started)."""
        self.open_streams -= 1
        left = self.open_by_key.get(api_key_id, 0) - 1
        if left > 0:
            self.open_by_key[api_key_id] = left
        else:
            self.open_by_key.pop(api_key_id, None)

    async def close(self) -> None:
        """Close the pool (the application's shutdown)."""
        await self._redis.aclose()

    def valid_cursor(self, value: str) -> bool:
        """Whether a stream can resume after ``value`` (a ``Last-Event-ID``): see :func:`valid_cursor`."""
        return valid_cursor(value, len(self._shards))

    async def start_id(self, tenant: str, last_event_id: str | None) -> str:
        """Where ``tenant``'s stream starts: after ``last_event_id``, else after each shard's newest entry of its
        own events now."""
        if last_event_id:
            return last_event_id
        return ",".join(newest or "0-0" for newest in await newest_event_ids(self._redis, self._keys, tenant))

    def _positions(self, cursor: str) -> list[str]:
        """A cursor (one entry id, or one per shard) as each shard's position."""
        parts = cursor.split(",")
        return parts * len(self._shards) if len(parts) == 1 else parts

    async def follow(
        self, tenant: str, after: str, *, job_ids: frozenset[str], group_ids: frozenset[str], api_key_id: str
    ) -> AsyncIterator[FeedItem]:
        """The tenant's completion events after cursor ``after`` (:meth:`start_id`), until the caller stops reading.

        Read from the tenant's own events streams (see the module's docstring): nothing of another tenant's
        is read. With ``job_ids`` or ``group_ids``, only those jobs' events, or those runs', documents' or
        batches'. If a shard's stream was trimmed past its position (by the tenant's retention), a ``gap``
        item comes first: events were missed, and the client should look the jobs up instead. A keep-alive goes out
        whenever nothing was sent for :data:`BLOCK_MS` (however busy other tenants keep the
        streams), and the stream ends there if ``api_key_id`` has been revoked meanwhile.
        """
        positions = self._positions(after)
        if any(position != "0-0" for position in positions):
            oldest = await oldest_event_ids(self._redis, self._keys, tenant)
            if any(  # "0-0": from the start of that shard's stream (it was empty when the feed began), never a gap
                first is not None and position != "0-0" and _after(first, _next(position))
                for first, position in zip(oldest, positions, strict=True)
            ):
                message = "events before the oldest kept one were trimmed; look missed jobs up by id"
                kept = ",".join(first or position for first, position in zip(oldest, positions, strict=True))
                yield FeedItem("gap", data=json.dumps({"oldest": kept, "message": message}))
        reads: dict[int, asyncio.Task[Entries]] = {}
        last_sent = time.monotonic()
        try:
            while True:
                for shard, keys in enumerate(self._shards):
                    if shard not in reads:
                        reads[shard] = asyncio.create_task(
                            read_events(self._redis, keys, positions[shard], READ_COUNT, BLOCK_MS, tenant)
                        )
                done, _ = await asyncio.wait(reads.values(), return_when=asyncio.FIRST_COMPLETED)
                for shard in sorted(shard for shard, task in reads.items() if task in done):
                    for entry_id, fields in reads.pop(shard).result():
                        positions[shard] = str(entry_id)
                        if fields.get("tenant") != tenant:  # never in the tenant's own stream: a last guard
                            continue
                        group = fields.get("group")
                        if (job_ids or group_ids) and fields.get("id") not in job_ids and group not in group_ids:
                            continue
                        yield FeedItem("event", ",".join(positions), _data(fields.get("payload", "{}"), group))
                        last_sent = time.monotonic()
                if time.monotonic() - last_sent >= BLOCK_MS / 1000:
                    if await is_revoked(self._redis, self._keys, api_key_id):
                        return
                    yield FeedItem("keepalive")
                    last_sent = time.monotonic()
        finally:
            for task in reads.values():
                task.cancel()
            for task in reads.values():
                with contextlib.suppress(BaseException):
                    await task


def _next(entry_id: str) -> str:
    """The entry id right after ``entry_id``."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq) + 1}"


def _data(payload: str, group: str | None) -> str:
    """The event's JSON: the job's completion payload, with the run or document it belongs to."""
    try:
        event = json.loads(payload)
    except ValueError:
        event = {}
    event["group_id"] = group
    return json.dumps(event, separators=(",", ":"))
