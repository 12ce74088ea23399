"""A tenant's recent source languages (``broker.recent_sources``): recorded, trimmed, expiring, read by frequency."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.recent_sources import RECENT_SOURCES_TTL_S, recent_sources
from contract.settings import Settings


@pytest.fixture
def keys(settings: Settings) -> RedisKeys:
    return RedisKeys.from_settings(settings)


async def test_the_most_frequent_first_then_the_newest_read_before_this_request_is_recorded(
    async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    tenant, other = f"t-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    for language in ("fr", "de", "de", "fr", "es"):  # oldest first
        await recent_sources(async_redis, keys, tenant, limit=3, keep=10, record=language)
    # de and fr twice each (fr the more recent), es once; the call's own record comes after the read
    assert await recent_sources(async_redis, keys, tenant, limit=3, keep=10, record="it") == ["fr", "de", "es"]
    assert await recent_sources(async_redis, keys, tenant, limit=2, keep=10) == ["fr", "de"]
    assert await async_redis.lrange(keys.recent_sources(tenant), 0, -1) == ["it", "es", "fr", "de", "de", "fr"]
    assert 0 < await async_redis.ttl(keys.recent_sources(tenant)) <= RECENT_SOURCES_TTL_S
    assert await recent_sources(async_redis, keys, other, limit=3, keep=10) == []  # tenants apart


async def test_only_the_last_keep_requests_count(async_redis: aioredis.Redis, keys: RedisKeys) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    for language in ["de"] * 5 + ["ja"] * 3:
        await recent_sources(async_redis, keys, tenant, limit=3, keep=3, record=language)
    assert await async_redis.llen(keys.recent_sources(tenant)) == 3  # never past keep
    assert await recent_sources(async_redis, keys, tenant, limit=3, keep=3) == ["ja"]  # German is no longer recent
    # a read alone neither records nor sets an expiry on a list that is not there
    fresh = f"t-{uuid.uuid4().hex[:8]}"
    assert await recent_sources(async_redis, keys, fresh, limit=3, keep=3) == []
    assert not await async_redis.exists(keys.recent_sources(fresh))
