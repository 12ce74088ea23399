"""Fair share's staging area on a real Redis: SUBMIT stages a busy lane's tenant jobs, REFILL moves them by turns.

Every test here runs the real scripts (``submit.lua``, ``refill.lua``) against the embedded Redis;
the worker's side (a 3,000-job backlog not holding another tenant's job) is in
``tests/worker/test_fair_share.py``.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import Counter
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from broker.consumer_groups import ensure_group
from broker.fair_share import LaneRefiller, staged_entries
from broker.keys import RedisKeys
from broker.scripts import CancelScript, StartScript, SubmitScript
from contract.schemas import JobSpec, Lane
from contract.settings import Settings

TTL = 3600


@pytest.fixture
def keys(settings: Settings) -> RedisKeys:
    return RedisKeys.from_settings(settings)


def _spec(tenant: str | None, n: int = 0, lane: Lane = Lane.BULK) -> JobSpec:
    return JobSpec(
        job_id=str(uuid.uuid4()),
        text=f"{tenant} {n}",
        source_lang="en",
        target_lang="fr",
        created_at=1_700_000_000.5,
        tenant=tenant,
        lane=lane,
    )


def _script(keys: RedisKeys, buffer: int | None) -> SubmitScript:
    return SubmitScript(keys, TTL, TTL, fair_share_buffer=buffer)


async def _submit(
    script: SubmitScript,
    client: aioredis.Redis,
    specs: list[JobSpec],
    weights: dict[str, int] | None = None,
) -> list[str]:
    return await script.call_many(client, [(spec, None) for spec in specs], weights=weights)


def _lane_ids(raw_redis: redis.Redis, stream: str) -> list[str]:
    """Job ids in ``stream``, oldest entry first."""
    entries: Any = raw_redis.xrange(stream)
    return [fields["id"] for _, fields in entries]


def _tenants_in(raw_redis: redis.Redis, stream: str) -> list[str]:
    entries: Any = raw_redis.xrange(stream)
    return [json.loads(fields["payload"]).get("tenant", "") for _, fields in entries]


async def test_jobs_without_a_tenant_go_into_the_lane_whatever_it_holds(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    specs = [_spec(None, n) for n in range(10)]
    await _submit(_script(keys, 2), async_redis, specs)
    assert _lane_ids(raw_redis, keys.bulk_jobs_stream) == [s.job_id for s in specs]
    assert raw_redis.llen(keys.rotation(keys.bulk_jobs_stream)) == 0


async def test_a_tenants_job_goes_straight_into_a_short_lane_and_is_staged_behind_a_full_one(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    specs = [_spec("acme", n) for n in range(10)]
    await _submit(_script(keys, 4), async_redis, specs, {"acme": 3})
    assert _lane_ids(raw_redis, lane) == [s.job_id for s in specs[:4]]
    assert _lane_ids(raw_redis, keys.staging(lane, "acme")) == [s.job_id for s in specs[4:]]
    assert raw_redis.lrange(keys.rotation(lane), 0, -1) == ["acme"]
    assert raw_redis.hget(keys.tenant_weights, "acme") == "3"
    assert raw_redis.hget(keys.state(specs[7].job_id), "status") == "queued"  # staged is queued
    assert await staged_entries(async_redis, keys, lane) == 6
    # Read 3 of the 4: one unread left, so room again, but acme has jobs staged: its next job
    # goes behind them (a tenant's order is kept), not into the lane.
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=3)
    late = _spec("acme", 10)
    await _submit(_script(keys, 4), async_redis, [late])
    assert _lane_ids(raw_redis, keys.staging(lane, "acme"))[-1] == late.job_id
    # Another tenant with nothing staged goes straight in while the lane is short.
    other = _spec("globex", 0)
    await _submit(_script(keys, 4), async_redis, [other])
    assert _lane_ids(raw_redis, lane)[-1] == other.job_id


async def test_without_fair_share_every_job_goes_into_the_lane(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    specs = [_spec("acme", n) for n in range(10)]
    await _submit(_script(keys, None), async_redis, specs)
    assert _lane_ids(raw_redis, keys.bulk_jobs_stream) == [s.job_id for s in specs]
    assert not raw_redis.exists(keys.staging(keys.bulk_jobs_stream, "acme"))


async def test_refill_takes_turns_and_moves_no_more_than_the_read_wants(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    script = _script(keys, 1)
    acme = [_spec("acme", n) for n in range(20)]
    globex = [_spec("globex", n) for n in range(3)]
    await _submit(script, async_redis, acme)
    await _submit(script, async_redis, globex)
    assert _lane_ids(raw_redis, lane) == [acme[0].job_id]  # the one job of an idle lane
    refiller = LaneRefiller(keys, batch=1, quantum=1)
    assert await refiller.refill(async_redis, lane, 8) == 7  # 8 wanted, 1 unread already
    assert _tenants_in(raw_redis, lane) == ["acme", "acme", "globex", "acme", "globex", "acme", "globex", "acme"]
    assert await refiller.refill(async_redis, lane, 8) == 0  # nothing read since: the lane holds 8
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=8)
    assert await refiller.refill(async_redis, lane, 100) == 15  # the rest: acme alone (globex is done)
    assert raw_redis.lrange(keys.rotation(lane), 0, -1) == []
    assert not raw_redis.exists(keys.staging(lane, "acme"), keys.staging(lane, "globex"), keys.deficits(lane))
    # Each tenant's jobs in the order they were submitted, each exactly once.
    ids = _lane_ids(raw_redis, lane)
    assert [i for i in ids if i in {s.job_id for s in acme}] == [s.job_id for s in acme]
    assert [i for i in ids if i in {s.job_id for s in globex}] == [s.job_id for s in globex]


async def test_weights_give_turns_in_proportion(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    raw_redis.xadd(lane, {"v": "1", "id": "x", "payload": "{}"})  # the lane is full (buffer 1): all staged
    script = _script(keys, 1)
    await _submit(script, async_redis, [_spec("heavy", n) for n in range(60)], {"heavy": 3})
    await _submit(script, async_redis, [_spec("light", n) for n in range(60)], {"light": 1})
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=1)
    refiller = LaneRefiller(keys, batch=1, quantum=1)
    for _ in range(10):  # reads of 4, as a worker freeing slots a few at a time does
        await refiller.refill(async_redis, lane, 4)
        raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=4)
    moved = _tenants_in(raw_redis, lane)[1:]
    assert len(moved) == 40
    assert Counter(moved) == {"heavy": 30, "light": 10}
    assert moved[:8] == ["heavy"] * 3 + ["light"] + ["heavy"] * 3 + ["light"]


async def test_a_quantum_moves_that_many_per_turn(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.jobs_stream
    raw_redis.xadd(lane, {"v": "1", "id": "x", "payload": "{}"})
    script = _script(keys, 1)
    await _submit(script, async_redis, [_spec("a", n, Lane.INTERACTIVE) for n in range(10)])
    await _submit(script, async_redis, [_spec("b", n, Lane.INTERACTIVE) for n in range(10)])
    await LaneRefiller(keys, batch=1, quantum=4).refill(async_redis, lane, 13)  # no consumer group yet: 1 unread
    assert _tenants_in(raw_redis, lane)[1:] == ["a"] * 4 + ["b"] * 4 + ["a"] * 4


async def test_more_tenants_than_one_call_names_are_reached_by_going_round(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    raw_redis.xadd(lane, {"v": "1", "id": "x", "payload": "{}"})
    script = _script(keys, 1)
    tenants = [f"t{n:02d}" for n in range(10)]
    for tenant in tenants:
        await _submit(script, async_redis, [_spec(tenant, 0), _spec(tenant, 1)])
    refiller = LaneRefiller(keys, batch=1, quantum=1, tenants_per_call=3)
    assert await refiller.refill(async_redis, lane, 1 + 20) == 20
    assert _tenants_in(raw_redis, lane)[1:11] == tenants  # one turn each, in the order they arrived
    assert await staged_entries(async_redis, keys, lane) == 0


async def test_a_staged_job_that_is_cancelled_is_answered_cancelled_when_read(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    raw_redis.xadd(lane, {"v": "1", "id": "x", "payload": "{}"})
    staged = _spec("acme", 0)
    await _submit(_script(keys, 1), async_redis, [staged])
    assert _lane_ids(raw_redis, keys.staging(lane, "acme")) == [staged.job_id]
    await CancelScript(keys).call(async_redis, staged.job_id, 1.0)
    await LaneRefiller(keys, batch=1, quantum=1).refill(async_redis, lane, 2)
    [outcome] = await StartScript(keys, TTL).call(async_redis, "w", 2.0, [staged])
    assert outcome.cancelled
    assert _lane_ids(raw_redis, lane)[-1] == staged.job_id


async def test_concurrent_submits_refills_and_a_dead_reader_lose_and_duplicate_nothing(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis, settings: Settings
) -> None:
    """Tenants submitting at once, three readers refilling and reading, one of them killed mid-way
    (its entries claimed by the others): every job is delivered, once, each tenant's in order."""
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    submitted: dict[str, list[str]] = {}
    acked: list[str] = []
    done = asyncio.Event()

    async def tenant(name: str, jobs: int) -> None:
        script = _script(keys, 8)
        ids = submitted.setdefault(name, [])
        for start in range(0, jobs, 25):
            chunk = [_spec(name, n) for n in range(start, min(jobs, start + 25))]
            ids += await _submit(script, async_redis, chunk, {name: random.choice([1, 2])})
            await asyncio.sleep(0)

    async def reader(consumer: str, dies_after: int | None) -> None:
        refiller = LaneRefiller(keys, quantum=1, tenants_per_call=2)
        reads = 0
        while True:
            want = random.randint(1, 16)
            got = await refiller.refill_and_read(async_redis, consumer, {lane: want}, {lane: want})
            entries = [entry for _, items in got for entry in items]
            reads += 1
            if dies_after is not None and reads >= dies_after and entries:
                return  # killed: what it read stays pending, never acked
            if entries:
                acked.extend(fields["id"] for _, fields in entries)
                await async_redis.xack(lane, keys.consumer_group, *[entry_id for entry_id, _ in entries])
            elif done.is_set() and not await staged_entries(async_redis, keys, lane):
                return
            await asyncio.sleep(0)

    readers = [asyncio.create_task(reader(f"r{n}", 5 if n == 0 else None)) for n in range(3)]
    await asyncio.gather(*(tenant(f"t{n}", 150 + 50 * n) for n in range(4)))
    done.set()
    await asyncio.gather(*readers)
    # The dead reader's entries: claimed by a live consumer, as the worker's reclaim does.
    claimed = (await async_redis.xautoclaim(lane, keys.consumer_group, "r1", 0, "0-0", count=1000))[1]
    acked.extend(fields["id"] for _, fields in claimed)
    all_ids = [i for ids in submitted.values() for i in ids]
    assert sorted(acked) == sorted(all_ids)  # none lost, none delivered twice
    lane_ids = _lane_ids(raw_redis, lane)
    assert sorted(lane_ids) == sorted(all_ids)  # each moved into the lane once
    for ids in submitted.values():
        wanted = set(ids)
        assert [i for i in lane_ids if i in wanted] == ids  # a tenant's own order
    assert await staged_entries(async_redis, keys, lane) == 0
    assert raw_redis.llen(keys.rotation(lane)) == 0


async def test_a_turn_cut_short_by_the_read_goes_on_at_the_next_refill(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    raw_redis.xadd(lane, {"v": "1", "id": "x", "payload": "{}"})
    script = _script(keys, 1)
    await _submit(script, async_redis, [_spec("a", n) for n in range(10)])
    await _submit(script, async_redis, [_spec("b", n) for n in range(10)])
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=1)
    refiller = LaneRefiller(keys, batch=1, quantum=3)
    assert await refiller.refill(async_redis, lane, 2) == 2  # a's turn of 3, cut after 2
    assert raw_redis.hget(keys.deficits(lane), "a") == "1"
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=2)
    assert await refiller.refill(async_redis, lane, 5) == 5
    assert _tenants_in(raw_redis, lane)[1:] == ["a", "a", "a", "b", "b", "b", "a"]
    assert raw_redis.hget(keys.deficits(lane), "a") == "2"


async def test_a_refill_tops_the_lane_up_to_a_batch_and_skips_while_the_lane_holds_what_a_read_wants(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    raw_redis.xadd(lane, {"v": "1", "id": "x", "payload": "{}"})
    await _submit(_script(keys, 1), async_redis, [_spec("a", n) for n in range(100)])
    refiller = LaneRefiller(keys, quantum=1, batch=16)
    assert await refiller.refill(async_redis, lane, 2) == 15  # up to 16 unread, not just the 2 wanted
    for _ in range(7):  # reads of 2 find what they want: nothing moved (one cheap check each)
        raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=2)
        assert await refiller.refill(async_redis, lane, 2) == 0
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=2)  # the 16th: the lane is empty
    assert await refiller.refill(async_redis, lane, 2) == 16


async def test_unread_entries_are_counted_right_after_a_deletion_in_the_lane(
    keys: RedisKeys, async_redis: aioredis.Redis, raw_redis: redis.Redis
) -> None:
    """REFILL counts a lane's unread entries by its group's lag; after an XDEL of an unread entry (a
    requeue, a cancel) the lag is unknown to Redis and the count falls back to XRANGE, not a stale 3."""
    lane = keys.bulk_jobs_stream
    await ensure_group(async_redis, lane, keys.consumer_group)
    ids = [raw_redis.xadd(lane, {"v": "1", "id": f"x{n}", "payload": "{}"}) for n in range(3)]
    await _submit(_script(keys, 1), async_redis, [_spec("a", n) for n in range(10)])
    refiller = LaneRefiller(keys, quantum=10, batch=1)
    assert await refiller.refill(async_redis, lane, 3) == 0  # 3 unread: by the lag
    raw_redis.xdel(lane, ids[1])
    assert await refiller.refill(async_redis, lane, 3) == 1  # 2 unread now: 1 moved
    raw_redis.xreadgroup(keys.consumer_group, "w", {lane: ">"}, count=3)
    assert await refiller.refill(async_redis, lane, 3) == 3
