"""The Redis record of a run or document: what the worker's finish script counts a group's jobs against.

Written before the group's jobs are queued, deleted by the orchestrator once the group's row is
final (it expires with the jobs' state records anyway; see ``broker/scripts/finish.lua``).
"""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def register_group(
    client: aioredis.Redis, keys: RedisKeys, group_id: str, kind: str, total: int, ttl_seconds: int
) -> None:
    """Write the record of a run or document (``kind``: ``"run"`` or ``"document"``) of ``total`` jobs."""
    key = keys.group(group_id)
    async with client.pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping={"kind": kind, "id": group_id, "total": total})
        pipe.expire(key, ttl_seconds)
        await pipe.execute()


async def forget_group(client: aioredis.Redis, keys: RedisKeys, group_id: str) -> None:
    """Delete a finished group's record and done-set now (their TTL would take them later)."""
    await client.delete(keys.group(group_id), keys.group_done(group_id))
