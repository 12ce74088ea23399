"""A tenant's stand-alone jobs that may still be unfinished: how the job history finds those with no row yet.

A job's row reaches PostgreSQL when it finishes (the worker's writer), so ``GET /v1/jobs`` reads its
queued and running jobs from Redis: the submitter adds each stand-alone job of a tenant to the
tenant's set (:meth:`~broker.keys.RedisKeys.tenant_standalone`, scored by ``created_at``), and the
set is pruned to the members still in the tenant's unfinished-jobs set (SUBMIT adds a job there,
FINISH removes it), with one ``ZINTERSTORE``: when it is read, and when a write finds it past
:data:`PRUNE_ABOVE` members. So it holds about the tenant's unfinished stand-alone jobs (bounded by
its key's limit of unfinished jobs), plus those finished since the last prune; it expires with the
state records when the tenant submits nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys

PRUNE_ABOVE = 1_000
"""Members past which a write prunes the finished ones (a tenant that submits a lot and never lists)."""


async def note_standalone(
    client: aioredis.Redis, keys: RedisKeys, jobs: Sequence[tuple[str, str, float]], ttl_seconds: int
) -> None:
    """Add ``(tenant, job id, created_at)`` of just-queued stand-alone jobs to their tenants' sets (one round trip,
    a second for a set that grew past :data:`PRUNE_ABOVE`)."""
    if not jobs:
        return
    by_tenant: dict[str, dict[str, float]] = defaultdict(dict)
    for tenant, job_id, created_at in jobs:
        by_tenant[tenant][job_id] = created_at
    async with client.pipeline(transaction=False) as pipe:
        for tenant, members in by_tenant.items():
            key = keys.tenant_standalone(tenant)
            pipe.zadd(key, members)
            pipe.expire(key, ttl_seconds)
            pipe.zcard(key)
        replies = await pipe.execute()
    sizes = replies[2::3]
    for tenant, size in zip(by_tenant, sizes, strict=True):
        if int(size) > PRUNE_ABOVE:
            await _prune(client, keys, tenant, ttl_seconds)


async def _prune(client: aioredis.Redis, keys: RedisKeys, tenant: str, ttl_seconds: int) -> None:
    """Keep only the members that are still among the tenant's unfinished jobs (their scores kept)."""
    key = keys.tenant_standalone(tenant)
    async with client.pipeline(transaction=True) as pipe:
        pipe.zinterstore(key, {key: 1, keys.tenant_queued(tenant): 0}, aggregate="SUM")
        pipe.expire(key, ttl_seconds)
        await pipe.execute()


async def unfinished_standalone(
    client: aioredis.Redis, keys: RedisKeys, tenant: str, max_score: float | None, count: int, ttl_seconds: int
) -> list[tuple[str, float]]:
    """The tenant's unfinished stand-alone jobs, newest first: ``(job id, created_at)``, at most ``count``, with
    ``created_at`` at most ``max_score`` (``None``: any). Pruned first, in the same round trip."""
    key = keys.tenant_standalone(tenant)
    async with client.pipeline(transaction=True) as pipe:
        pipe.zinterstore(key, {key: 1, keys.tenant_queued(tenant): 0}, aggregate="SUM")
        pipe.expire(key, ttl_seconds)
        pipe.zrevrangebyscore(key, "+inf" if max_score is None else repr(max_score), "-inf", 0, count, withscores=True)
        replies = await pipe.execute()
    return [(_text(member), float(score)) for member, score in replies[2]]


def _text(member: bytes | str) -> str:
    return member.decode() if isinstance(member, bytes) else member
