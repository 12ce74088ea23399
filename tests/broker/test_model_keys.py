"""Each served model's lanes, and the registry of served names."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from broker.keys import RedisKeys, hash_tag, served_keys
from broker.model_registry import (
    forget_model_names,
    pin_default_model,
    read_served_names,
    register_served_names,
)
from contract.errors import ConfigurationError
from contract.schemas import Lane
from contract.settings import Settings


def test_the_default_model_keeps_the_plain_lanes_and_another_gets_its_own_under_the_same_tag() -> None:
    keys = RedisKeys.from_settings(Settings(key_prefix="dm"))
    assert keys.lane(Lane.INTERACTIVE) == "{dm}:jobs"
    assert keys.lane(Lane.BULK, "default") == "{dm}:jobs:bulk"
    small = keys.for_model("small")
    assert (small.jobs_stream, small.bulk_jobs_stream) == ("{dm}:model:small:jobs", "{dm}:model:small:jobs:bulk")
    assert keys.lane(Lane.BULK, "small") == small.bulk_jobs_stream
    assert hash_tag(small.jobs_stream) == keys.tag  # scripts touching it share the slot
    assert small.for_model("default").jobs_stream == "{dm}:jobs"
    assert small.events_stream == keys.events_stream  # only the lanes differ


def test_a_worker_reads_the_lanes_of_its_first_served_name() -> None:
    assert served_keys(Settings(key_prefix="dm")).jobs_stream == "{dm}:jobs"
    worker = served_keys(Settings(key_prefix="dm", served_model_names=["hy", "hy-mt"]))
    assert (worker.model, worker.jobs_stream) == ("hy", "{dm}:model:hy:jobs")
    renamed = served_keys(Settings(key_prefix="dm", default_model="hy", served_model_names=["hy"]))
    assert renamed.jobs_stream == "{dm}:jobs"  # the default model, whatever its name, has the plain lanes


async def test_served_names_register_as_aliases_of_the_first(async_redis: aioredis.Redis, settings: Settings) -> None:
    keys = RedisKeys.from_settings(settings)
    assert await register_served_names(async_redis, keys, ["hy", "hy-mt"]) == {}
    names, _ = await read_served_names(async_redis, keys)
    assert names == {"hy": "hy", "hy-mt": "hy"}
    assert names.get("hy-mt") == "hy" and names.get("nope") is None
    # A name taken over by another model is reported, so the worker can say so.
    assert await register_served_names(async_redis, keys, ["hy2", "hy-mt"]) == {"hy-mt": "hy"}
    assert (await read_served_names(async_redis, keys))[0].get("hy-mt") == "hy2"
    assert await forget_model_names(async_redis, keys, ["hy-mt", "never"]) == 1


async def test_an_alias_may_not_take_another_model_s_own_name(async_redis: aioredis.Redis, settings: Settings) -> None:
    keys = RedisKeys.from_settings(settings)
    await register_served_names(async_redis, keys, ["hy", "hy-mt"])
    with pytest.raises(ConfigurationError, match="already the name of a model of its own"):
        await register_served_names(async_redis, keys, ["small", "hy"])  # would take hy's jobs
    with pytest.raises(ConfigurationError, match="registered as an alias of model 'hy'"):
        await register_served_names(async_redis, keys, ["hy-mt"])
    assert (await read_served_names(async_redis, keys))[0] == {"hy": "hy", "hy-mt": "hy"}  # nothing written


async def test_every_process_must_agree_on_the_default_model(async_redis: aioredis.Redis, settings: Settings) -> None:
    """The default model's lanes are the plain streams: a process with another default would misroute jobs."""
    first = RedisKeys.from_settings(settings)
    await pin_default_model(async_redis, first)
    await pin_default_model(async_redis, first)  # the same again: fine
    renamed = RedisKeys.from_settings(settings.model_copy(update={"default_model": "llama"}))
    with pytest.raises(ConfigurationError, match="this deployment's default model is 'default'"):
        await pin_default_model(async_redis, renamed)
    await forget_model_names(async_redis, first, ["default"])  # the operator's way to rename it
    await pin_default_model(async_redis, renamed)
    assert (await read_served_names(async_redis, renamed))[1] == "llama"
