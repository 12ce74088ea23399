"""The shared asyncio Redis client packs with hiredis and behaves like redis-py's own, on a real server."""

from __future__ import annotations

import uuid
from typing import Any

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
