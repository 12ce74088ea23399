"""The shared asyncio Redis client packs with hiredis and behaves like redis-py's own, on a real server."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.exceptions import DataError

from broker.redis_client import RedisPoolBusyError, open_redis
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


async def test_a_cluster_client_s_callers_wait_for_a_connection_and_none_is_closed_under_them(cluster_url: str) -> None:
    """More concurrent pipelines than ``max_connections`` (an API server under a burst): redis-py's node raised
    MaxConnectionsError, which a cluster pipeline takes for a failed node, closing the connections of every
    other caller in flight ("Connection closed by server", writelines on None)."""
    prefix = uuid.uuid4().hex
    keys = [f"{{{prefix}:{shard}}}:x" for shard in range(3)]
    redis = open_redis(cluster_url, max_connections=4, wait_for_connection_s=30)

    async def read_all() -> list[str | None]:
        async with redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.get(key)
            return list(await pipe.execute())

    try:
        await redis.set(keys[0], "a")
        results = await asyncio.gather(*(read_all() for _ in range(300)), return_exceptions=True)
        assert [result for result in results if isinstance(result, BaseException)] == []
        assert all(result == ["a", None, None] for result in results)
    finally:
        await redis.delete(keys[0])
        await redis.aclose()


async def test_a_cluster_client_whose_connections_stay_busy_says_the_server_is_busy(cluster_url: str) -> None:
    redis = open_redis(cluster_url, max_connections=2, wait_for_connection_s=0.2)
    try:
        blocked = asyncio.ensure_future(redis.blpop([f"{{{uuid.uuid4().hex}}}:never"], timeout=2))
        await asyncio.sleep(0.1)
        with pytest.raises(RedisPoolBusyError):
            await redis.ping()
        await blocked
    finally:
        await redis.aclose()


async def test_a_fresh_cluster_client_can_subscribe_first(cluster_url: str) -> None:
    """A subscription as a new client's first use (a producer whose first call waits): redis-py routed it by
    slots it had not learnt yet (KeyError)."""
    redis = open_redis(cluster_url)
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(f"test-channel-{uuid.uuid4().hex}")
    finally:
        await pubsub.aclose()
        await redis.aclose()


def test_connection_faults_as_errors_turns_only_redis_pys_leaked_errors() -> None:
    """redis-py 8.1 leaks AttributeError/TypeError from a broken connection (redis/redis-py#4287): a ConnectionError;
    the same error from anywhere else stays what it is."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from broker.redis_client import connection_faults_as_errors

    scope: dict[str, Any] = {"__name__": "redis.asyncio.connection"}
    exec(compile("def send(writer):\n    writer.writelines([b'PING'])\n", "connection.py", "exec"), scope)
    with pytest.raises(RedisConnectionError, match="writelines"), connection_faults_as_errors():
        scope["send"](None)
    with pytest.raises(AttributeError), connection_faults_as_errors():
        None.writelines  # type: ignore[attr-defined]  # noqa: B018
    # uvloop's transport, written to once the connection under it closed (a primary killed in a failover).
    closed = "unable to perform operation on <TCPTransport closed=True reading=False>; the handler is closed"
    scope["closed"] = closed
    exec(compile("def write(transport):\n    raise RuntimeError(closed)\n", "streams.py", "exec"), scope)
    with pytest.raises(RedisConnectionError, match="the handler is closed"), connection_faults_as_errors():
        scope["write"](None)
    with pytest.raises(RuntimeError, match="Event loop is closed"), connection_faults_as_errors():
        raise RuntimeError("Event loop is closed")
