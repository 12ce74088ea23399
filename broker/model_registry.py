"""The served models' names: every name a worker has served, and the model whose lanes it reads.

A worker registers its ``--served-model-name``\\ s when it starts (the first maps to itself, each
alias to the first), so that a producer can send a job naming an alias to the model's lanes and
refuse a name nobody serves, and ``GET /v1/models`` can list a model while no worker of it is
up. The hash is never expired: a model whose workers all stopped is still known (its jobs wait
for the next worker); ``unregister_model_names`` forgets names for an operator.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def register_served_names(redis: aioredis.Redis, keys: RedisKeys, names: Sequence[str]) -> dict[str, str]:
    """Map each of ``names`` to ``names[0]``; return the names that mapped to another model before, with it."""
    if not names:
        raise ValueError("a worker serves at least one model name")
    model = names[0]
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hmget(keys.models, list(names))
        pipe.hset(keys.models, mapping=dict.fromkeys(names, model))
        before, _ = await pipe.execute()
    return {
        name: _text(old) for name, old in zip(names, before, strict=True) if old is not None and _text(old) != model
    }


async def resolve_model_name(redis: aioredis.Redis, keys: RedisKeys, name: str) -> str | None:
    """The model whose lanes a job naming ``name`` goes to, or None if no worker has served that name."""
    found = await redis.hget(keys.models, name)
    return None if found is None else _text(found)


async def read_model_names(redis: aioredis.Redis, keys: RedisKeys) -> dict[str, str]:
    """Every registered name -> its model."""
    return {_text(k): _text(v) for k, v in (await redis.hgetall(keys.models)).items()}


async def unregister_model_names(redis: aioredis.Redis, keys: RedisKeys, names: Sequence[str]) -> int:
    """Forget ``names`` (a model retired for good); return how many were registered."""
    return int(await redis.hdel(keys.models, *names)) if names else 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
