"""The tenant's set of unfinished jobs: SUBMIT adds each, FINISH removes it; its size is what the API limits.

A member that outlived the state records' TTL belongs to a job whose record expired before it
finished (FINISH could not see its tenant): :func:`count_queued` drops those before counting.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def count_queued(client: aioredis.Redis, keys: RedisKeys, tenant: str, now: float, state_ttl: int) -> int:
    """The tenant's queued and running jobs at ``now`` (members older than ``state_ttl`` seconds dropped first)."""
    key = keys.tenant_queued(tenant)
    async with client.pipeline(transaction=False) as pipe:
        pipe.zremrangebyscore(key, "-inf", now - state_ttl)
        pipe.zcard(key)
        _, count = await pipe.execute()
    return int(count)
