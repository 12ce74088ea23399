"""A job's state record in Redis, as the client reads it (SUBMIT, START and FINISH write it, in Lua)."""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def read_state(client: aioredis.Redis, keys: RedisKeys, job_id: str) -> dict[str, str]:
    """The job's state record (status, languages, times, tenant...); empty if it has none (unknown or expired)."""
    state: dict[str, str] = await client.hgetall(keys.state(job_id))  # type: ignore[assignment]
    return state
