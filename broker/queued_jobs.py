"""The tenant's unfinished jobs: SUBMIT adds each to the tenant's set on the job's shard, FINISH removes it; with
the tenant's reservations (``reserve.lua``) the sum over shards is what the API limits.

A member that outlived the state records' TTL belongs to a job whose record expired before it
finished (FINISH could not see its tenant): :func:`count_queued` drops those before counting.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.scripts.reserve import ReserveScript


async def count_queued(client: aioredis.Redis, keys: RedisKeys, tenant: str, now: float, state_ttl: int) -> int:
    """The tenant's queued and running jobs at ``now``, with those admitted but not yet queued (members older
    than ``state_ttl`` seconds and lapsed reservations dropped first)."""
    # A limit no count fits: RESERVE only prunes and counts, and reserves nothing.
    admission = await ReserveScript(keys, state_ttl, lease=0).admit(client, tenant, -1, now)
    return admission.queued
