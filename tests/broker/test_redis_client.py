"""The shared asyncio Redis client packs with hiredis and behaves like redis-py's own, on a real server."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.exceptions import DataError

from broker.redis_client import open_redis
from contract.services import ServiceUrls


async def test_commands_scripts_and_pipelines_round_trip(service_urls: ServiceUrls) -> None:
    redis = open_redis(service_urls.redis_url)
    stream = f"test-client-{uuid.uuid4().hex}"
    try:
        assert type(await redis.connection_pool.get_connection()).__name__.startswith("HiredisPacking")
        assert await redis.ping()
        await redis.xgroup_create(stream, "g", id="0", mkstream=True)  # "XGROUP CREATE": a two-word command
        script = redis.register_script("return {ARGV[1], ARGV[2], #ARGV}")
        assert await script(args=["é", 1.5, 7]) == ["é", "1.5", 3]
        async with redis.pipeline(transaction=True) as pipe:
            pipe.xadd(stream, {"text": "x" * 10_000, "n": 3})
            pipe.xlen(stream)
            _, length = await pipe.execute()
        assert length == 1
        assert [group["name"] for group in await redis.xinfo_groups(stream)] == ["g"]
        await redis.set(f"{stream}:view", memoryview(b"bytes as a view"))  # packed the slower way
        assert await redis.get(f"{stream}:view") == "bytes as a view"
    finally:
        await redis.delete(stream, f"{stream}:view")
        await redis.aclose()


async def test_an_argument_redis_cannot_carry_is_a_data_error(service_urls: ServiceUrls) -> None:
    redis = open_redis(service_urls.redis_url)
    try:
        with pytest.raises(DataError):
            await redis.set("k", None)  # type: ignore[arg-type]
    finally:
        await redis.aclose()


async def test_a_fresh_cluster_client_runs_commands_started_together(cluster_url: str) -> None:
    """One command per shard at once on a new client (the dispatcher's first step): redis-py 8.1 routed
    them on seed connections that its initialization closed, failing about one try in ten."""
    prefix = uuid.uuid4().hex
    keys = [f"{{{prefix}:{shard}}}:x" for shard in range(9)]
    failures = []
    for _ in range(40):
        redis = open_redis(cluster_url)
        try:
            results = await asyncio.gather(*(redis.set(key, 1) for key in keys), return_exceptions=True)
            failures += [result for result in results if isinstance(result, BaseException)]
            await redis.delete(*keys[:1])
        finally:
            await redis.aclose()
    assert failures == []
