"""Follows every shard's completions stream and queues one :func:`~orchestrator.tasks.finish_group` per
completed run or document.

The worker's finish script appends an entry when the last job of a shard's part of a run or document
is committed (``broker/group_records.py``: with several shards a group has one part per shard). The
dispatcher reads each shard's stream with its own consumer group (one XREADGROUP per shard, all
shards at once: streams of several shards in one command is ``CROSSSLOT`` on a cluster) and, for an
entry, queues the group's finish task once every part is complete. It acknowledges the entry only
after that, so a crash in between handles it again (queueing a finish twice is harmless: its RQ job
id is the group's, and finishing is idempotent). A tenant's group (its record names the tenant) has its finish
queued in the tenant's turn (``broker/orchestration.py``): an assembly waits behind at most one task of each
other tenant, not behind everything queued before it.

Why the group is finished, and finished once: a part's entry is appended by the one FINISH call that
takes that part's done-count to its total, in the same atomic call; the count never goes down while
the record exists (it is deleted only once the group is final, after the finish). So when the
dispatcher handles the entry of the part that completed LAST, every other part completed before it,
and the check (made after reading that entry, so after it was appended) sees every part complete:
the finish is queued. An earlier part's entry may see the group incomplete (acknowledged, nothing
queued) or, if the other parts completed meanwhile, complete too: then the finish is queued twice,
and the second run of ``finish_group`` finds the row final and does nothing (no second webhook).

The dispatcher runs on the orchestrator's threads (synchronous, like RQ) but talks to Redis with the
asyncio client (:func:`broker.redis_client.open_redis`: a single server or a cluster alike) on an
event loop of its own (``contract/sync_bridge.py``), which also lets it wait on every shard's stream
at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import TypeVar

import redis
import redis.asyncio as aioredis

from broker.completions import ack_completion, read_completions
from broker.consumer_groups import ensure_group
from broker.group_records import group_tenant, incomplete_parts
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from contract.orchestration import FINISH
from contract.sync_bridge import LoopThread
from orchestrator.context import TaskContext

log = logging.getLogger(__name__)
T = TypeVar("T")


class CompletionDispatcher:
    """Moves completion entries into the RQ queue; :meth:`step` is what its background loop repeats."""

    def __init__(self, ctx: TaskContext, consumer: str = "dispatcher") -> None:
        self._ctx = ctx
        self._consumer = consumer
        self._loop = LoopThread("dragoman-dispatcher-io")
        self._redis: aioredis.Redis = open_redis(ctx.redis_url)

    def ensure_group(self) -> None:
        """Create the consumer group on every shard's completions stream (from its start) if needed."""
        group = self._ctx.keys.orchestration_group
        self._loop.run(_all(ensure_group(self._redis, shard.completions_stream, group) for shard in self._shards))

    @property
    def _shards(self) -> tuple[RedisKeys, ...]:
        return self._ctx.keys.shards

    def dispatch_once(self, block_ms: int | None = None) -> int:
        """Handle what is waiting on every shard (own unacknowledged entries first, then new ones, waiting up
        to ``block_ms`` for them); return how many finish tasks were queued."""
        return sum(self._loop.run(_all(self._dispatch_shard(shard, block_ms) for shard in self._shards)))

    async def _dispatch_shard(self, shard: RedisKeys, block_ms: int | None) -> int:
        """:meth:`dispatch_once` on one shard's stream; an entry is handled as soon as it is read."""
        queued = 0
        for cursor in ("0", ">"):
            block = block_ms if cursor == ">" else None
            for entry_id, fields in await read_completions(self._redis, shard, self._consumer, cursor, 100, block):
                if fields and fields.get("kind") in ("run", "document") and fields.get("id"):
                    queued += await self._finish_if_complete(fields["kind"], fields["id"], shard.shard)
                elif fields:
                    log.warning("ignoring malformed completion entry %s: %s", entry_id, fields)
                await ack_completion(self._redis, shard, entry_id)
        return queued

    async def _finish_if_complete(self, kind: str, group_id: str, shard: int) -> int:
        """Queue the group's finish if every shard's part is complete (1), else leave it to the last part (0)."""
        keys = self._ctx.keys
        if keys.shard_count > 1:  # one shard: the entry's part is the whole group
            waiting = await incomplete_parts(self._redis, keys, group_id)
            if waiting:
                log.info("%s %s: part on shard %d complete; waiting for shards %s", kind, group_id, shard, waiting)
                return 0
        tenant = await group_tenant(self._redis, keys.for_shard(shard), group_id)
        if tenant is None:  # nobody's (the CLI's, the Python client's), or its record is gone: no turn to take
            await asyncio.to_thread(self._ctx.enqueue, FINISH, kind, group_id)
        else:
            await asyncio.to_thread(self._ctx.enqueue, FINISH, kind, group_id, tenant=tenant)
        return 1

    def step(self) -> int:
        """One blocking round of :meth:`dispatch_once` (for a :class:`~orchestrator.background.BackgroundLoop`).

        A consumer group that vanished (the stream deleted or trimmed away) is created again.
        """
        try:
            return self.dispatch_once(block_ms=1_000)
        except redis.ResponseError as exc:
            if not str(exc).startswith("NOGROUP"):
                raise
            log.warning("a completions consumer group is gone (%s); creating it again", exc)
            self.ensure_group()
            return 0

    def close(self) -> None:
        """Close the Redis connections and the dispatcher's event loop."""
        try:
            self._loop.run(self._redis.aclose())
        finally:
            self._loop.close()


async def _all(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Await every one concurrently; the first error is raised as it is (not in a group), and the others
    are cancelled first (none goes on reading a stream after the step that started it ended)."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
