"""The served models' names: every name a worker has served, and the model whose lanes it reads.

A worker registers its ``--served-model-name``\\ s when it starts (the first maps to itself, each
alias to the first), so that a producer can send a job naming an alias to the model's lanes and
refuse a name nobody serves, and ``GET /v1/models`` can list a model while no worker of it is
up. The hash is never expired: a model whose workers all stopped is still known (its jobs wait
for the next worker); ``forget_model_names`` forgets names for an operator (``dragoman
served-models forget``).

Which model is the *default* decides stream names (its lanes keep the plain ``{dragoman}:jobs``),
so every process must agree on it: the first worker pins ``DRAGOMAN_DEFAULT_MODEL`` in Redis
(:func:`pin_default_model`), and a worker or producer configured with another one refuses to run
instead of sending jobs to lanes nobody reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from broker.keys import RedisKeys
from contract.errors import ConfigurationError


async def register_served_names(redis: aioredis.Redis, keys: RedisKeys, names: Sequence[str]) -> dict[str, str]:
    """Map each of ``names`` to ``names[0]``; return the aliases that mapped to another model before, with it.

    Raises :class:`~contract.errors.ConfigurationError` when an alias is another model's own name
    (its jobs and routes would silently go to this model) or when ``names[0]`` is registered as an
    alias of another model.
    """
    if not names:
        raise ValueError("a worker serves at least one model name")
    model = names[0]
    before = dict(zip(names, await redis.hmget(keys.models, list(names)), strict=True))
    taken = [name for name in names[1:] if before[name] is not None and _text(before[name]) == name]
    if taken:
        raise ConfigurationError(
            f"--served-model-name {', '.join(taken)}: already the name of a model of its own, which this worker "
            f"(model {model!r}) would take its jobs from; serve it under another alias, or forget the old model "
            f"first (`dragoman served-models forget {' '.join(taken)}`)"
        )
    if before[model] is not None and _text(before[model]) != model:
        raise ConfigurationError(
            f"--served-model-name {model}: registered as an alias of model {_text(before[model])!r}; name this "
            f"worker's model differently, or forget the alias first (`dragoman served-models forget {model}`)"
        )
    await redis.hset(keys.models, mapping=dict.fromkeys(names, model))
    return {name: _text(old) for name, old in before.items() if old is not None and _text(old) not in (model, name)}


async def pin_default_model(redis: aioredis.Redis, keys: RedisKeys) -> None:
    """Record ``keys.default_model`` as the deployment's default model, or check it is the one recorded.

    Raises :class:`~contract.errors.ConfigurationError` when another process pinned another one.
    """
    async with redis.pipeline(transaction=True) as pipe:
        pipe.set(keys.default_model_pin, keys.default_model, nx=True)
        pipe.get(keys.default_model_pin)
        _, pinned = await pipe.execute()
    check_default_model(keys, None if pinned is None else _text(pinned))


def check_default_model(keys: RedisKeys, pinned: str | None) -> None:
    """Raise :class:`~contract.errors.ConfigurationError` if ``pinned`` names another default model than ``keys``'."""
    if pinned is not None and pinned != keys.default_model:
        raise ConfigurationError(
            f"DRAGOMAN_DEFAULT_MODEL={keys.default_model!r} here, but this deployment's default model is {pinned!r} "
            "(its lanes are the plain {prefix}:jobs streams, so every process must agree): set "
            f"DRAGOMAN_DEFAULT_MODEL={pinned} for every worker, API and client, or, to rename it, drain its lanes, "
            f"stop everything and run `dragoman served-models forget {pinned}`"
        )


async def read_served_names(redis: aioredis.Redis, keys: RedisKeys) -> tuple[dict[str, str], str | None]:
    """Every registered name -> its model, and the pinned default model (None before any worker ran)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(keys.models)
        pipe.get(keys.default_model_pin)
        names, pinned = await pipe.execute()
    return {_text(k): _text(v) for k, v in names.items()}, None if pinned is None else _text(pinned)


async def forget_model_names(redis: aioredis.Redis, keys: RedisKeys, names: Sequence[str]) -> int:
    """Forget ``names`` (a model retired for good, a mistyped alias); return how many were registered.

    Forgetting the pinned default model unpins it, so that the next worker pins its own.

    The two keys are untagged (their names predate hash tags, and renaming them would strand every
    deployment's registry), so on a Redis Cluster they lie in two slots and cannot share a
    MULTI/EXEC. None is needed: the names are deleted first, then the pin is deleted only if it
    still names one of them, with ``WATCH`` on the pin alone (one key, one slot), so a worker that
    pins its own default model meanwhile keeps its pin instead of losing it to a stale read.
    """
    if not names:
        return 0
    forgotten = int(await redis.hdel(keys.models, *names))
    async with redis.pipeline(transaction=True) as pipe:
        while True:
            try:
                await pipe.watch(keys.default_model_pin)
                pinned = await pipe.get(keys.default_model_pin)
                if pinned is None or _text(pinned) not in names:
                    break  # leaving the pipeline unwatches
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.delete(keys.default_model_pin)
                await pipe.execute()
                break
            except WatchError:
                continue  # the pin changed between GET and DEL: look again
    return forgotten


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
