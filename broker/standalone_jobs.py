"""A tenant's stand-alone jobs that may still be unfinished: how the job history finds those with no row yet.

A job's row reaches PostgreSQL when it finishes (the worker's writer), so ``GET /v1/jobs`` reads its
queued and running jobs from Redis: the submitter adds each stand-alone job of a tenant to the
tenant's set (:meth:`~broker.keys.RedisKeys.tenant_standalone`, scored by ``created_at``). A job is
unfinished while it is in the tenant's unfinished-jobs set (SUBMIT adds it there, FINISH removes
it). Finished members leave the stand-alone set two ways, each costing about one step per job:

- a read (``unfinished_standalone.lua``) walks down from its cursor and removes those it passes;
- a write that finds at least :data:`PRUNE_ABOVE` finished members, and at least as many finished
  as unfinished, keeps only the unfinished (one ``ZINTERSTORE``, its work paid for by the members
  it removes): a tenant that submits a lot and never lists holds a bounded set.

The set expires with the state records when the tenant submits nothing.

With several shards a tenant has one such set per shard, beside that shard's unfinished-jobs set:
a job is noted on its own shard, and a read walks every shard's set (one script call each, in one
pipelined round trip) and merges them, newest first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.scripts import UnfinishedStandaloneScript
from contract.ids import shard_of

PRUNE_ABOVE = 1_000
"""Finished members (at least: the set's size less the tenant's unfinished jobs) past which a write prunes."""


async def note_standalone(
    client: aioredis.Redis, keys: RedisKeys, jobs: Sequence[tuple[str, str, float]], ttl_seconds: int
) -> None:
    """Add ``(tenant, job id, created_at)`` of just-queued stand-alone jobs to their tenants' sets (one round trip,
    a second for a set with many finished members)."""
    if not jobs:
        return
    shards = keys.shards
    by_tenant: dict[tuple[int, str], dict[str, float]] = defaultdict(dict)
    for tenant, job_id, created_at in jobs:
        by_tenant[shard_of(job_id, len(shards)), tenant][job_id] = created_at
    async with client.pipeline(transaction=False) as pipe:
        for (shard, tenant), members in by_tenant.items():
            key = shards[shard].tenant_standalone(tenant)
            pipe.zadd(key, members)
            pipe.expire(key, ttl_seconds)
            pipe.zcard(key)
            pipe.zcard(shards[shard].tenant_queued(tenant))
        replies = await pipe.execute()
    for index, (shard, tenant) in enumerate(by_tenant):
        noted, unfinished = int(replies[4 * index + 2]), int(replies[4 * index + 3])
        finished_at_least = noted - unfinished  # the unfinished set also holds the tenant's runs' jobs
        if finished_at_least > max(PRUNE_ABOVE, unfinished):
            await _prune(client, shards[shard], tenant, ttl_seconds)


async def _prune(client: aioredis.Redis, keys: RedisKeys, tenant: str, ttl_seconds: int) -> None:
    """Keep only the members that are still among the tenant's unfinished jobs (their scores kept), on the shard
    ``keys`` name (both sets are that shard's: one hash tag, as MULTI/EXEC on a cluster needs)."""
    key = keys.tenant_standalone(tenant)
    async with client.pipeline(transaction=True) as pipe:
        pipe.zinterstore(key, {key: 1, keys.tenant_queued(tenant): 0}, aggregate="SUM")
        pipe.expire(key, ttl_seconds)
        await pipe.execute()


async def unfinished_standalone(
    client: aioredis.Redis, keys: RedisKeys, tenant: str, max_score: float | None, count: int
) -> list[tuple[str, float]]:
    """The tenant's unfinished stand-alone jobs, newest first: ``(job id, created_at)``, at most ``count``, with
    ``created_at`` at most ``max_score`` (``None``: any); finished ones passed on the way are removed."""
    return await UnfinishedStandaloneScript(keys).call(client, tenant, max_score, count)
