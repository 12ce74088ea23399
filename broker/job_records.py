"""A job's state record in Redis, as the client reads it (SUBMIT, START and FINISH write it, in Lua).

A record lives on its job's shard (``RedisKeys.for_job``). Reading many is one pipelined round trip
whatever their shards: a single server answers the pipeline in one go, and redis-py's cluster
pipeline sends each node its own commands, concurrently.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from contract.ids import shard_of


async def read_state(client: aioredis.Redis, keys: RedisKeys, job_id: str) -> dict[str, str]:
    """The job's state record (status, languages, times, tenant...); empty if it has none (unknown or expired)."""
    state: dict[str, str] = await client.hgetall(keys.for_job(job_id).state(job_id))  # type: ignore[assignment]
    return state


async def read_states(client: aioredis.Redis, keys: RedisKeys, job_ids: Sequence[str]) -> list[dict[str, str]]:
    """The state records of many jobs in one pipelined round trip, in ``job_ids``' order (empty for none)."""
    if not job_ids:
        return []
    shards = keys.shards
    async with client.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hgetall(shards[shard_of(job_id, len(shards))].state(job_id))
        states: list[dict[str, str]] = await pipe.execute()
    return states
