"""Stats, dead letters, the Redis check and the model registry on a real Redis Cluster, 3 shards over its primaries.

On a single server, a command naming keys of two hash tags works; on a cluster it is refused
(``CROSSSLOT``), and redis-py refuses some commands in a cluster pipeline outright (``MGET``): only
here do those mistakes show. On the test cluster (``cluster_settings``: 3 primaries and their replicas).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from broker.dead_letters import DeadLetters
from broker.keys import RedisKeys
from broker.model_registry import forget_model_names, pin_default_model, read_served_names, register_served_names
from broker.queue_stats import read_queue_stats
from broker.redis_client import is_cluster, open_redis
from broker.redis_health import check_redis
from cli.check import check_health
from contract.ids import new_job_id_on_shard
from contract.schemas import JobSpec
from contract.settings import Settings
from contract.wire import encode_job_entry
from worker.metrics import WorkerMetrics
from worker.ops_server import OpsServer

SHARDS = 3


@pytest.fixture
def on_cluster(cluster_settings: Settings) -> Settings:
    """The cluster's settings with 3 shards and a key prefix of this test's own."""
    return cluster_settings.model_copy(update={"redis_shards": SHARDS, "key_prefix": f"ops-{uuid.uuid4().hex[:8]}"})


@pytest.fixture
async def cluster(on_cluster: Settings) -> AsyncIterator[aioredis.Redis]:
    """An asyncio client of the cluster."""
    assert on_cluster.redis_url
    client = open_redis(on_cluster.redis_url, socket_timeout=5)
    assert is_cluster(client)
    yield client
    await client.aclose()


async def test_stats_and_the_check_on_a_cluster(on_cluster: Settings, cluster: aioredis.Redis) -> None:
    keys = RedisKeys.from_settings(on_cluster)
    shard0, shard2 = keys.for_shard(0), keys.for_shard(2)
    for i in range(2):
        await cluster.xadd(shard0.jobs_stream, {"id": f"a{i}"})
    for i in range(5):
        await cluster.xadd(shard2.jobs_stream, {"id": f"b{i}"})
    await cluster.xgroup_create(shard2.jobs_stream, keys.consumer_group, id="0")
    await cluster.xreadgroup(keys.consumer_group, "w", {shard2.jobs_stream: ">"}, count=3)
    now = int(time.time())
    await cluster.set(shard0.finished_in_second(now), 30)
    await cluster.set(shard2.finished_in_second(now), 60)
    await cluster.xadd(shard2.dead_letter_stream, {"reason": "r"})
    stats = await read_queue_stats(cluster, keys)
    assert (stats.length, stats.lag, stats.pending, stats.finished_last_minute, stats.dead_letters) == (7, 4, 3, 90, 1)
    assert [(s.shard, s.length, s.lag, s.pending) for s in stats.shards] == [(0, 2, 2, 0), (1, 0, 0, 0), (2, 5, 2, 3)]

    health = await check_redis(cluster, keys)
    assert health.ok and health.cluster and health.primaries >= 3
    assert health.layout == f"cluster of {health.primaries} primaries, 3 shards"


async def test_dead_letters_on_a_cluster(on_cluster: Settings, cluster: aioredis.Redis) -> None:
    keys = RedisKeys.from_settings(on_cluster)
    on0, on2 = new_job_id_on_shard(0, SHARDS), new_job_id_on_shard(2, SHARDS)
    for shard, job_id in ((0, on0), (2, on2)):
        spec = JobSpec(job_id, "text", "en", "fr", time.time(), tenant="acme")
        await cluster.xadd(keys.for_shard(shard).dead_letter_stream, {**encode_job_entry(spec), "reason": "r"})
    letters = DeadLetters(cluster, on_cluster)
    assert sorted((e.shard, e.job_id) for e in await letters.entries()) == [(0, on0), (2, on2)]
    assert await letters.retry(on2) == on2 and await letters.retry(on0) == on0
    for shard, job_id in ((0, on0), (2, on2)):
        names = keys.for_shard(shard)
        assert [f["id"] for _, f in await cluster.xrange(names.jobs_stream)] == [job_id]
        assert await cluster.hget(names.state(job_id), "status") == "queued"
        assert await cluster.zscore(names.tenant_queued("acme"), job_id) is not None
    await cluster.xadd(keys.for_shard(1).dead_letter_stream, {"reason": "x"})
    assert await letters.purge() == 1


async def test_the_model_registry_on_a_cluster(on_cluster: Settings, cluster: aioredis.Redis) -> None:
    keys = RedisKeys.from_settings(on_cluster)
    await register_served_names(cluster, keys, ["hy", "hy-mt"])
    await pin_default_model(cluster, keys)
    assert await forget_model_names(cluster, keys, ["hy-mt", "nope"]) == 1
    assert await read_served_names(cluster, keys) == ({"hy": "hy"}, "default")  # the pin names no forgotten name
    assert await forget_model_names(cluster, keys, ["hy", keys.default_model]) == 1
    assert await read_served_names(cluster, keys) == ({}, None)  # forgetting the default unpins it


async def test_readiness_metrics_and_check_on_a_cluster(on_cluster: Settings, cluster: aioredis.Redis) -> None:
    assert on_cluster.redis_url and on_cluster.database_url
    keys = RedisKeys.from_settings(on_cluster)
    await cluster.xadd(keys.for_shard(1).dead_letter_stream, {"reason": "r"})
    ops = OpsServer(
        on_cluster,
        redis_url=on_cluster.redis_url,
        database_url=on_cluster.database_url,
        metrics=WorkerMetrics(),
        engine_state=lambda: "ok",
    )
    try:
        readiness = await ops.readiness()
        page = (await ops.render_metrics()).decode()
    finally:
        await ops.close()
    assert readiness.ready, readiness.checks
    layout = json.loads(readiness.to_json())["redis"]
    assert layout["cluster"] is True and layout["shards"] == SHARDS
    assert layout["primaries"] == layout["healthy_primaries"] >= 3
    assert 'dragoman_shard_dead_letters{shard="1"} 1.0' in page
    assert "dragoman_dead_letters 1.0" in page

    report = await asyncio.to_thread(check_health, on_cluster, require_worker=False)
    assert report.healthy and report.redis_layout.startswith("cluster of ") and report.redis_layout.endswith("3 shards")
