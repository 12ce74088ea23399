"""Job state records (``{<prefix>}:job:<id>`` hashes) outside the scripts that write them."""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def record_types(redis: aioredis.Redis, keys: RedisKeys, job_ids: Sequence[str]) -> list[str]:
    """The Redis type of each job's state record key (``hash``, ``none`` if absent, or whatever else holds it), in
    one round trip: START fails on a record some other program wrote as another type."""
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.type(keys.state(job_id))
        return [str(kind) for kind in await pipe.execute()]
