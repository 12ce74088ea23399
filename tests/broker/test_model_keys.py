"""Each served model's lanes, and the registry of served names."""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys, hash_tag, served_keys
from broker.model_registry import (
    read_model_names,
    register_served_names,
    resolve_model_name,
    unregister_model_names,
)
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
    assert await read_model_names(async_redis, keys) == {"hy": "hy", "hy-mt": "hy"}
    assert await resolve_model_name(async_redis, keys, "hy-mt") == "hy"
    assert await resolve_model_name(async_redis, keys, "nope") is None
    # A name taken over by another model is reported, so the worker can say so.
    assert await register_served_names(async_redis, keys, ["hy2", "hy-mt"]) == {"hy-mt": "hy"}
    assert await resolve_model_name(async_redis, keys, "hy-mt") == "hy2"
    assert await unregister_model_names(async_redis, keys, ["hy-mt", "never"]) == 1
