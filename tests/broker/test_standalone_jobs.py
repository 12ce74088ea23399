"""A tenant's stand-alone jobs that may be unfinished (``broker.standalone_jobs``): noted, pruned, read newest first."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

from broker import standalone_jobs
from broker.keys import RedisKeys
from broker.standalone_jobs import note_standalone, unfinished_standalone
from contract.settings import Settings


@pytest.fixture
def keys(settings: Settings) -> RedisKeys:
    return RedisKeys.from_settings(settings)


async def test_only_jobs_still_unfinished_are_read_newest_first_below_the_cursor(
    async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    tenant, other = f"t-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    jobs = [(tenant, f"job-{n}", 100.0 + n + 0.123456) for n in range(6)]
    await note_standalone(async_redis, keys, [*jobs, (other, "theirs", 150.0)], 600)
    # SUBMIT puts a job in the tenant's unfinished set and FINISH takes it out: job-1 and job-4 have finished.
    await async_redis.zadd(keys.tenant_queued(tenant), {f"job-{n}": 100.0 + n for n in (0, 2, 3, 5)})
    assert await unfinished_standalone(async_redis, keys, tenant, 104.5, 2) == [
        ("job-3", 103.123456),
        ("job-2", 102.123456),
    ]
    assert await async_redis.zscore(keys.tenant_standalone(tenant), "job-4") is None  # passed, so removed
    assert await async_redis.zscore(keys.tenant_standalone(tenant), "job-5") == 105.123456  # above the walk
    found = await unfinished_standalone(async_redis, keys, tenant, None, 10)
    assert found == [("job-5", 105.123456), ("job-3", 103.123456), ("job-2", 102.123456), ("job-0", 100.123456)]
    assert await async_redis.zcard(keys.tenant_standalone(tenant)) == 4
    assert 0 < await async_redis.ttl(keys.tenant_standalone(tenant)) <= 600
    assert await unfinished_standalone(async_redis, keys, other, None, 10) == []  # nothing of theirs unfinished


async def test_a_read_walks_past_many_finished_jobs_to_fill_its_page(
    async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    await note_standalone(async_redis, keys, [(tenant, f"job-{n}", float(n)) for n in range(100)], 600)
    await async_redis.zadd(keys.tenant_queued(tenant), {"job-3": 3.0, "job-7": 7.0})
    assert await unfinished_standalone(async_redis, keys, tenant, None, 3) == [("job-7", 7.0), ("job-3", 3.0)]
    assert await async_redis.zcard(keys.tenant_standalone(tenant)) == 2


async def test_a_write_prunes_a_set_with_many_finished_members(
    async_redis: aioredis.Redis, keys: RedisKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(standalone_jobs, "PRUNE_ABOVE", 3)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    await async_redis.zadd(keys.tenant_queued(tenant), {"live": 1.0})
    await note_standalone(async_redis, keys, [(tenant, f"done-{n}", float(n)) for n in range(4)], 600)
    assert await async_redis.zcard(keys.tenant_standalone(tenant)) == 4  # 3 finished at least: not past the bound
    await note_standalone(async_redis, keys, [(tenant, "live", 1.0)], 600)
    assert await async_redis.zrange(keys.tenant_standalone(tenant), 0, -1) == ["live"]
    assert 0 < await async_redis.ttl(keys.tenant_standalone(tenant)) <= 600


async def test_a_write_leaves_a_set_of_unfinished_jobs_alone(
    async_redis: aioredis.Redis, keys: RedisKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(standalone_jobs, "PRUNE_ABOVE", 3)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    jobs = [(tenant, f"job-{n}", float(n)) for n in range(20)]
    await async_redis.zadd(keys.tenant_queued(tenant), {job_id: score for _, job_id, score in jobs})
    await note_standalone(async_redis, keys, jobs, 600)
    assert await async_redis.zcard(keys.tenant_standalone(tenant)) == 20


def test_the_set_carries_the_deployments_tag(keys: RedisKeys) -> None:
    assert keys.tenant_standalone("acme") == f"{keys.tag}:tenant:acme:standalone"
