"""CANCEL (``cancel.lua``): cancel a queued job, or ask the worker running it to abort it."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript
from contract.ids import shard_of

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

_LUA = LuaScript("cancel.lua")


class CancelOutcome(StrEnum):
    """What a cancel did: the first two are cancels; the others say why there was none."""

    CANCELLED = "cancelled"  # it was queued (or had already been cancelled)
    CANCEL_REQUESTED = "cancel_requested"  # it is running: its worker was told to abort it
    MISSING = "missing"  # no state record: unknown, expired, or final in PostgreSQL only
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class CancelScript:
    """Cancels jobs of one deployment (its key names).

    A cancel is final, so the state record it writes has no TTL: it is kept until a worker
    reaches the job's entry, START answers "cancelled" (for a cancelled record, and for a running
    one whose cancel was requested, in case its worker died and another reclaims it), and FINISH
    writes the cancelled row and gives the record the finished TTL. An expiring record would
    let a backlog older than the TTL run the job anyway: START would recreate it as running.

    Keeping the record rather than writing the cancelled row at cancel time keeps cancelling a
    Redis-only step (an application that only submits never needs PostgreSQL, and the record
    does not know the text a row needs). The record lives no longer than the job's entry: every
    entry is eventually read, and the stream is trimmed only below what was acknowledged.
    """

    def __init__(self, keys: RedisKeys) -> None:
        self._keys = keys
        self._shards = keys.shards

    def layout(self, job_id: str, now: float) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that cancel ``job_id`` at ``now`` (unix seconds): its state record, on its shard."""
        keys = self._shards[shard_of(job_id, len(self._shards))]
        return [keys.state(job_id)], [repr(now), keys.control_channel, job_id]

    async def call(self, client: aioredis.Redis, job_id: str, now: float) -> CancelOutcome:
        """Cancel one job and say what happened."""
        return CancelOutcome(await _LUA.run(client, *self.layout(job_id, now)))

    async def call_many(self, client: aioredis.Redis, job_ids: Sequence[str], now: float) -> list[CancelOutcome]:
        """Cancel many jobs in one pipelined round trip; the outcomes are in the order of ``job_ids``."""

        def queue(pipe: AsyncPipeline) -> None:
            for job_id in job_ids:
                keys, args = self.layout(job_id, now)
                pipe.evalsha(_LUA.sha, len(keys), *keys, *args)

        return [CancelOutcome(reply) for reply in await _LUA.run_pipelined(client, queue)]
