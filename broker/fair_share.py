"""Fair share between tenants: the staging area in front of every lane, and the worker's refill of it.

A lane stays one stream per model and lane (consumer group, reclaim, dead letters, cancel and stats
work on it as before). In front of it, each tenant of the HTTP API has a *staging stream* per lane
(``RedisKeys.staging``) and the lane a *rotation* of the tenants with staged entries
(``RedisKeys.rotation``):

- SUBMIT (``scripts/submit.lua``) puts a tenant's job straight into the lane only while the tenant
  has nothing staged there and the lane holds fewer than ``fair_share_buffer`` unread entries (an
  idle system: the job wakes a blocked worker at once); otherwise it stages it. Jobs without a
  tenant (the Python client, the CLI, plain ``XADD`` producers) always go into the lane.
- REFILL (``scripts/refill.lua``), run by a worker right before it reads a lane (in the read's round
  trip), tops the lane up when it holds fewer unread entries than the read wants, to
  :data:`REFILL_BATCH` or the read's count, taking turns between tenants by deficit round robin:
  ``fair_share_quantum`` x the tenant's weight entries a turn. A tenant with 3,000 jobs staged
  therefore holds another tenant's first job behind at most the entries already in the lane.

Redis Cluster (issue 37) needs every key a script touches in KEYS, and the tenants are only known
from the rotation: each REFILL returns the rotation's first tenants, which the next call names
(:class:`LaneRefiller` remembers them per lane), so a refill costs no extra round trip, and when
the head of the rotation is a tenant the call did not name, the caller goes round again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from broker.keys import RedisKeys
from broker.lanes import StreamEntries
from broker.scripts.refill import LUA as REFILL_LUA
from broker.scripts.refill import Refilled, RefillScript, parse_refilled

log = logging.getLogger(__name__)

_MAX_ROUNDS = 8  # calls of one refill when the rotation's head keeps being a tenant not named yet
REFILL_BATCH = 64
"""A worker's refill tops a lane up to at least this many unread entries: a worker whose slots free a few at
a time then refills once every few reads (each refill has a fixed cost on Redis), and another tenant's new
job waits behind at most this many more entries."""


class LaneRefiller:
    """One worker's refills of its lanes, remembering each lane's rotation head between calls."""

    def __init__(self, keys: RedisKeys, quantum: int, tenants_per_call: int = 64, batch: int = REFILL_BATCH) -> None:
        self._keys = keys
        self._script = RefillScript(keys, quantum, tenants_per_call, least=batch)
        self._tenants: dict[str, tuple[str, ...]] = {}  # lane -> the rotation's first tenants, as last seen
        self.moved = 0  # entries this worker moved into lanes (for tests and metrics)

    def _note(self, lane: str, refilled: Refilled) -> None:
        self._tenants[lane] = refilled.tenants
        self.moved += refilled.moved

    async def refill(self, redis: aioredis.Redis, lane: str, want: int) -> int:
        """Top ``lane`` up to ``want`` unread entries from the tenants' staging streams; return how many moved.

        Goes round again (up to a few calls) while the rotation's head is a tenant the last call
        did not name and the lane still wants entries.
        """
        moved = 0
        for _ in range(_MAX_ROUNDS):
            named = self._tenants.get(lane, ())
            refilled = await self._script.call(redis, lane, want, named)
            self._note(lane, refilled)
            moved += refilled.moved
            if not _goes_round(refilled, named, want):
                break
        return moved

    async def refill_and_read(
        self, redis: aioredis.Redis, consumer: str, refills: Mapping[str, int], reads: Mapping[str, int]
    ) -> StreamEntries:
        """REFILL each lane of ``refills`` (up to its count) then ``XREADGROUP`` each lane of ``reads`` (up to
        its count, new entries, no blocking): one round trip.

        A refill that fails (its script not loaded yet, say) does not lose the reads queued with it:
        their entries are returned (they are this consumer's pending entries now), the error is logged,
        and a lane whose refill went round short is refilled again on its own.
        """
        async with redis.pipeline(transaction=False) as pipe:
            for lane, want in refills.items():
                self._script.queue_on(pipe, lane, want, self._tenants.get(lane, ()))
            for lane, count in reads.items():
                pipe.xreadgroup(self._keys.consumer_group, consumer, {lane: ">"}, count=count)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        refill_replies, read_replies = replies[: len(refills)], replies[len(refills) :]
        for reply in read_replies:
            if isinstance(reply, Exception):
                raise reply
        for (lane, want), reply in zip(refills.items(), refill_replies, strict=True):
            named = self._tenants.get(lane, ())
            if isinstance(reply, NoScriptError):
                await redis.script_load(REFILL_LUA.source)
                await self.refill(redis, lane, want)
            elif isinstance(reply, ResponseError):
                log.error("refilling lane %s failed (%s); its staged jobs wait for the next read", lane, reply)
            elif isinstance(reply, Exception):
                raise reply
            else:
                refilled = parse_refilled(reply)
                self._note(lane, refilled)
                if _goes_round(refilled, named, want):
                    await self.refill(redis, lane, want)
        return [item for reply in read_replies if reply for item in reply]


def _goes_round(refilled: Refilled, named: tuple[str, ...], want: int) -> bool:
    """Whether a refill stopped short at a tenant it was not given (so another call would move more)."""
    short = refilled.unread < want and refilled.moved < want - refilled.unread
    return short and bool(refilled.tenants) and refilled.tenants[0] not in named


async def staged_entries(redis: aioredis.Redis, keys: RedisKeys, lane: str) -> int:
    """Entries staged for ``lane`` by all its tenants (the rotation, then one ``XLEN`` each: O(tenants))."""
    tenants: list[Any] = await redis.lrange(keys.rotation(lane), 0, -1)
    if not tenants:
        return 0
    async with redis.pipeline(transaction=False) as pipe:
        for tenant in tenants:
            pipe.xlen(keys.staging(lane, tenant.decode() if isinstance(tenant, bytes) else str(tenant)))
        lengths: list[Any] = await pipe.execute()
    return sum(int(n) for n in lengths)
