"""A job's state record in Redis, as the client reads it (SUBMIT, START and FINISH write it, in Lua)."""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def read_state(client: aioredis.Redis, keys: RedisKeys, job_id: str) -> dict[str, str]:
    """The job's state record (status, languages, times, tenant...); empty if it has none (unknown or expired)."""
    state: dict[str, str] = await client.hgetall(keys.state(job_id))  # type: ignore[assignment]
    return state


async def read_states(client: aioredis.Redis, keys: RedisKeys, job_ids: list[str]) -> list[dict[str, str]]:
    """The state records of ``job_ids``, in order (empty for those that have none), in one pipelined round trip."""
    if not job_ids:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hgetall(keys.state(job_id))
        states: list[dict[str, str]] = await pipe.execute()
    return states
