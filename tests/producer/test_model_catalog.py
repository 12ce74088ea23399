"""The model catalog: which models have a live worker (cached a second), and what a queued job waits for."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.redis_client import open_redis
from contract.models import ModelRoute
from contract.schemas import Job, JobStatus, Lane
from contract.settings import Settings
from producer.model_catalog import ModelCatalog
from producer.model_routing import ModelResolver


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def routed(settings: Settings) -> Settings:
    return settings.model_copy(update={"model_routes": [ModelRoute(source="zh*", model="small")]})


@pytest.fixture
async def client(routed: Settings) -> AsyncIterator[aioredis.Redis]:
    connection = open_redis(routed.redis_url or "")
    yield connection
    await connection.aclose()


def _join(raw_redis: redis.Redis, keys: RedisKeys, model: str, consumer: str) -> None:
    """What a worker of ``model`` does: join its lanes' group, and beat."""
    stream = keys.lane(Lane.INTERACTIVE, model)
    raw_redis.xgroup_create(stream, keys.consumer_group, id="0", mkstream=True)
    raw_redis.xgroup_createconsumer(stream, keys.consumer_group, consumer)
    raw_redis.hset(keys.worker(consumer), mapping={"models": model, "started_at": "1795392000.5"})


async def test_a_queued_job_of_a_model_without_a_live_worker_says_so_and_the_answer_is_cached_a_second(
    routed: Settings, client: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    keys = RedisKeys.from_settings(routed)
    clock = Clock()
    catalog = ModelCatalog(client, keys, ModelResolver(client, keys, routed), clock=clock)
    queued = Job(id="j", status=JobStatus.QUEUED, model="small")
    waiting = await catalog.waiting_for(queued)
    assert waiting == (
        "waiting for a worker of model small: none is running (`dragoman worker --served-model-name small` serves it)"
    )
    assert await catalog.waiting_for(Job(id="j", status=JobStatus.RUNNING, model="small")) is None

    _join(raw_redis, keys, "small", "w1")
    assert await catalog.waiting_for(queued) == waiting  # the answer of a moment ago
    clock.now += 1.0
    assert await catalog.waiting_for(queued) is None
    raw_redis.delete(keys.worker("w1"))  # the worker died: its consumer stays in the group
    clock.now += 1.0
    assert await catalog.waiting_for(queued) == waiting
    # A job naming no model is the default model's.
    default = await catalog.waiting_for(Job(id="k", status=JobStatus.QUEUED))
    assert default is not None and "model default" in default and "`dragoman worker`" in default


async def test_the_catalog_lists_configured_registered_and_live_models(
    routed: Settings, client: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    keys = RedisKeys.from_settings(routed)
    catalog = ModelCatalog(client, keys, ModelResolver(client, keys, routed))
    raw_redis.hset(keys.models, mapping={"big": "big", "large": "big"})  # registered by a worker now gone
    _join(raw_redis, keys, "default", "w0")
    raw_redis.hset(keys.worker("w0"), mapping={"models": "default deflt", "profile": "instruct:1"})
    models = await catalog.models()
    assert [(m.id, m.aliases, m.default, len(m.workers)) for m in models] == [
        ("default", ("deflt",), True, 1),
        ("big", ("large",), False, 0),
        ("small", (), False, 0),
    ]
    assert models[0].created == 1_795_392_000 and models[0].reported("profile") == "instruct:1"
    assert models[2].routes == (ModelRoute(source="zh*", model="small"),) and models[1].created == 0
    assert (await catalog.model("large")).id == "big"


async def test_the_controls_a_pair_s_model_applies_come_from_its_workers_heartbeats(
    routed: Settings, client: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    keys = RedisKeys.from_settings(routed)
    catalog = ModelCatalog(client, keys, ModelResolver(client, keys, routed))
    default = routed.default_model
    assert await catalog.controls_for("en", "de", Lane.INTERACTIVE) is None  # no live worker: unknown
    _join(raw_redis, keys, default, "w-default")
    assert await catalog.controls_for("en", "de", Lane.INTERACTIVE) is None  # a worker that reports none
    raw_redis.hset(keys.worker("w-default"), "controls", "context,glossary")
    _join(raw_redis, keys, "small", "w-small")
    raw_redis.hset(keys.worker("w-small"), "controls", "context,formality,glossary")
    assert await catalog.controls_for("en", "de", Lane.INTERACTIVE) == {"context", "glossary"}
    assert await catalog.controls_for("zh", "de", Lane.BULK) == {"context", "formality", "glossary"}  # routed
    raw_redis.hset(keys.worker("w-small"), "controls", "")
    assert await catalog.controls_for("zh-Hans", "en", Lane.INTERACTIVE) == frozenset()
