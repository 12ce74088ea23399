"""Reclaim, retries past max_attempts, dead letters, consumer clean-up and trimming, on a real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from broker.dead_letters import DeadLetters
from broker.keys import RedisKeys
from broker.pending import claim_orphans, claim_stale, forget_gone_consumers, keep_alive, trim_acknowledged
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine
from worker.service import Worker

from .conftest import identity_worker, wait_all


def _fast(settings: Settings, **overrides: Any) -> Settings:
    return settings.model_copy(update={"visibility_timeout_seconds": 0.3, "reclaim_interval_seconds": 0.1, **overrides})


def _worker(settings: Settings, urls: ServiceUrls, engine: DeterministicEngine, name: str | None = None) -> Worker:
    return identity_worker(settings, urls, engine, max_in_flight=8, consumer_name=name)


async def _abandon(worker: Worker) -> None:
    """What a kill -9 leaves behind: entries pending under a consumer that never comes back."""
    worker.consumer.stop_reading()
    for task in (worker._reader, worker._writer, worker._listener, worker._heartbeat, worker._housekeeping):
        assert task is not None
        task.cancel()
    for job in list(worker.consumer._tasks.values()):
        job.cancel()
    await asyncio.sleep(0.05)
    if worker.ops is not None:  # a dead process's port closes with it
        await worker.ops.close()
    await worker.redis.aclose()


async def test_a_second_worker_reclaims_what_a_dead_one_held(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
) -> None:
    settings = _fast(settings)
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(30))
    doomed_engine = DeterministicEngine(delay_s=60)
    doomed = _worker(settings, service_urls, doomed_engine, name="doomed")
    await doomed.start()
    while doomed_engine.in_flight < 8:
        await asyncio.sleep(0.01)
    await _abandon(doomed)
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 8

    survivor_engine = DeterministicEngine()
    survivor = _worker(settings, service_urls, survivor_engine)
    await survivor.start()
    try:
        jobs = await wait_all(client, ids)
    finally:
        await survivor.stop(grace_seconds=5)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 30
    assert survivor.consumer.reclaimed == 8
    reclaimed_attempts = sorted(j.attempts for j in jobs)[-8:]
    assert reclaimed_attempts == [2] * 8  # the delivery count became the attempt count
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0


async def test_a_restarted_worker_with_a_stable_name_resumes_its_own_jobs(
    settings: Settings, service_urls: ServiceUrls, client: Client
) -> None:
    settings = settings.model_copy(update={"visibility_timeout_seconds": 3600})  # no reclaim: only resume
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(5))
    engine = DeterministicEngine(delay_s=60)
    first = _worker(settings, service_urls, engine, name="pod-0")
    await first.start()
    while engine.in_flight < 5:
        await asyncio.sleep(0.01)
    await _abandon(first)

    again = _worker(settings, service_urls, DeterministicEngine(), name="pod-0")
    await again.start()
    try:
        jobs = await wait_all(client, ids)
    finally:
        await again.stop(grace_seconds=5)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 5


async def test_a_job_that_kills_its_worker_is_failed_and_dead_lettered(
    settings: Settings, service_urls: ServiceUrls, client: Client, async_redis: aioredis.Redis
) -> None:
    settings = _fast(settings, max_attempts=2)
    poison = client.submit("crash the worker", "en", "fr")
    fine = client.submit("fine", "en", "fr")
    for round_ in range(2):  # two workers die while running it
        engine = DeterministicEngine(delay_for=lambda prompt: 60.0 if prompt.startswith("crash") else 0.0)
        victim = _worker(settings, service_urls, engine, name=f"victim-{round_}")
        await victim.start()
        # The fine job is committed by the first victim before it dies; only the poison one is redelivered.
        while engine.in_flight < 1 or client.get(poison).attempts < round_ + 1 or not client.get(fine).status.is_final:
            await asyncio.sleep(0.01)
        await _abandon(victim)
    last = _worker(settings, service_urls, DeterministicEngine())
    await last.start()
    try:
        failed, ok = await wait_all(client, [poison, fine])
    finally:
        await last.stop(grace_seconds=5)
    assert ok.status is JobStatus.SUCCEEDED
    assert failed.status is JobStatus.FAILED and failed.attempts == 2
    assert failed.error and "gave up after 2 deliveries" in failed.error
    [letter] = await DeadLetters(async_redis, settings).entries()
    assert letter.job_id == poison and "gave up" in letter.reason


async def test_an_engine_error_every_time_dead_letters_and_retry_requeues(
    settings: Settings, service_urls: ServiceUrls, client: Client, async_redis: aioredis.Redis
) -> None:
    ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in ["ok 1", "POISON", "ok 2"])
    broken = DeterministicEngine(fail_if=lambda prompt: "POISON" in prompt)
    worker = _worker(settings, service_urls, broken)
    await worker.start()
    try:
        jobs = await wait_all(client, ids)
    finally:
        await worker.stop(grace_seconds=5)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.SUCCEEDED]
    dead = DeadLetters(async_redis, settings)
    [letter] = await dead.entries()
    assert letter.job_id == ids[1] and "EngineError" in letter.reason

    assert await dead.retry(ids[1]) == ids[1]  # the cause is fixed: run it again
    assert await dead.entries() == []
    assert client.get(ids[1]).status is JobStatus.QUEUED
    fixed = _worker(settings, service_urls, DeterministicEngine())
    await fixed.start()
    try:
        [job] = await wait_all(client, [ids[1]])
    finally:
        await fixed.stop(grace_seconds=5)
    assert (job.status, job.translation) == (JobStatus.SUCCEEDED, "POISON")


async def test_gone_consumers_are_forgotten_and_acknowledged_entries_trimmed(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
) -> None:
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(20))
    worker = _worker(settings, service_urls, DeterministicEngine())
    await worker.start()
    try:
        await wait_all(client, ids)
    finally:
        await worker.stop(grace_seconds=5)
    later = client.submit("not read yet", "en", "fr")
    keys = RedisKeys.from_settings(settings)
    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    try:
        raw_redis.xgroup_createconsumer(keys.jobs_stream, keys.consumer_group, "long-gone")
        await asyncio.sleep(0.05)
        assert await forget_gone_consumers(connection, keys, "me", gone_after_ms=10) == [
            "long-gone",
            worker.consumer.consumer_name,
        ]
        assert await trim_acknowledged(connection, keys) == 20
        assert await trim_acknowledged(connection, keys) == 0
    finally:
        await connection.aclose()
    [(_, fields)] = raw_redis.xrange(keys.jobs_stream)  # the undelivered job is kept
    assert fields["id"] == later


def _owner(raw_redis: redis.Redis, keys: RedisKeys, entry_id: str) -> tuple[str, int]:
    """Who holds a pending entry, and for how long it has been idle (ms)."""
    [pending] = raw_redis.xpending_range(keys.jobs_stream, keys.consumer_group, entry_id, entry_id, 1)
    return str(pending["consumer"]), int(pending["time_since_delivered"])


async def test_keep_alive_after_a_long_outage_does_not_take_back_a_reclaimed_entry(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
) -> None:
    """Worker a loses Redis for longer than the visibility timeout; b reclaims a's job meanwhile."""
    keys = RedisKeys.from_settings(settings)
    visibility_ms = 60_000
    client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(2))
    raw_redis.xgroup_create(keys.jobs_stream, keys.consumer_group, id="0")
    [(_, entries)] = raw_redis.xreadgroup(keys.consumer_group, "a", {keys.jobs_stream: ">"})
    taken, kept = (entry_id for entry_id, _ in entries)
    # The outage: both entries look as idle as they would after it.
    raw_redis.xclaim(
        keys.jobs_stream, keys.consumer_group, "a", 0, [taken, kept], idle=visibility_ms + 5_000, justid=True
    )
    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    try:
        claimed = await claim_stale(connection, keys, "b", visibility_ms, count=1)
        assert [entry_id for entry_id, _ in claimed.entries] == [taken]
        # a is back and keeps alive what it still holds, at half the visibility timeout.
        refreshed = await keep_alive(connection, keys, "a", [taken, kept], min_idle_ms=visibility_ms // 2)
    finally:
        await connection.aclose()
    assert refreshed == [kept]
    assert _owner(raw_redis, keys, taken)[0] == "b"  # b's, as reclaimed
    owner, idle_ms = _owner(raw_redis, keys, kept)
    assert owner == "a" and idle_ms < visibility_ms // 2  # a's own, fresh again: nobody reclaims it now


async def test_reclaim_goes_on_where_it_stopped_to_reach_stale_entries_behind_live_ones(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
) -> None:
    """XAUTOCLAIM looks at ten entries per claimable one; restarted at 0-0, it never got past live ones."""
    settings = settings.model_copy(update={"visibility_timeout_seconds": 60, "reclaim_interval_seconds": 0.02})
    keys = RedisKeys.from_settings(settings)
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(100))
    raw_redis.xgroup_create(keys.jobs_stream, keys.consumer_group, id="0")
    [(_, entries)] = raw_redis.xreadgroup(keys.consumer_group, "live", {keys.jobs_stream: ">"})
    assert len(entries) == 100  # held by a live worker, fresh, except the last: its worker died
    stale_entry = entries[-1][0]
    raw_redis.xclaim(keys.jobs_stream, keys.consumer_group, "dead", 0, [stale_entry], idle=120_000, justid=True)

    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    try:
        start, claimed = "0-0", []
        for _ in range(20):
            start, entries_now = await claim_stale(connection, keys, "survivor", 60_000, count=1, start=start)
            claimed += [entry_id for entry_id, _ in entries_now]
        assert claimed == [stale_entry]
    finally:
        await connection.aclose()
    # And the worker's reader keeps its cursor between rounds (one free slot: a scan of ten per round).
    # Both holders still beat, so this is the visibility timeout's case, not a dead worker's.
    raw_redis.xclaim(keys.jobs_stream, keys.consumer_group, "dead", 0, [stale_entry], idle=120_000, justid=True)
    for holder in ("live", "dead"):
        raw_redis.set(keys.worker(holder), "beating", ex=60)
    worker = identity_worker(settings, service_urls, DeterministicEngine(), max_in_flight=1)
    await worker.start()
    try:
        [job] = await wait_all(client, [ids[-1]])
    finally:
        await worker.stop(grace_seconds=5)
    assert job.status is JobStatus.SUCCEEDED and worker.consumer.reclaimed == 1
    assert _owner(raw_redis, keys, entries[0][0])[0] == "live"  # live workers' entries are left alone


async def test_entries_of_a_consumer_whose_heartbeat_expired_are_claimed_without_the_visibility_timeout(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
) -> None:
    """Held 20 s by a consumer with no heartbeat: taken; by a beating one, or read a moment ago: left."""
    keys = RedisKeys.from_settings(settings)
    client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(5))
    raw_redis.xgroup_create(keys.jobs_stream, keys.consumer_group, id="0")
    dead = [e for e, _ in raw_redis.xreadgroup(keys.consumer_group, "dead", {keys.jobs_stream: ">"}, count=2)[0][1]]
    alive = [e for e, _ in raw_redis.xreadgroup(keys.consumer_group, "alive", {keys.jobs_stream: ">"}, count=1)[0][1]]
    gone = [e for e, _ in raw_redis.xreadgroup(keys.consumer_group, "gone", {keys.jobs_stream: ">"}, count=1)[0][1]]
    just_read = [e for e, _ in raw_redis.xreadgroup(keys.consumer_group, "new", {keys.jobs_stream: ">"})[0][1]]
    raw_redis.set(keys.worker("alive"), "beating", ex=60)
    for holder, ids in (("dead", dead), ("alive", alive), ("gone", gone)):
        raw_redis.xclaim(keys.jobs_stream, keys.consumer_group, holder, 0, ids, idle=20_000, justid=True)
    raw_redis.xdel(keys.jobs_stream, *gone)  # deleted from the stream meanwhile: nothing to run

    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    try:
        claimed = await claim_orphans(connection, keys, "survivor", min_idle_ms=15_000, count=10)
        again = await claim_orphans(connection, keys, "other", min_idle_ms=15_000, count=10)
    finally:
        await connection.aclose()
    assert [entry_id for entry_id, _ in claimed] == dead
    assert all(fields for _, fields in claimed)  # the entries themselves, to run
    assert again == []  # just claimed by the survivor: idle again, nobody else takes them
    assert [_owner(raw_redis, keys, e)[0] for e in dead] == ["survivor", "survivor"]
    assert _owner(raw_redis, keys, alive[0])[0] == "alive"
    assert _owner(raw_redis, keys, just_read[0])[0] == "new"
    pending = raw_redis.xpending_range(keys.jobs_stream, keys.consumer_group, "-", "+", 10)
    assert gone[0] not in {p["message_id"] for p in pending}


@pytest.mark.parametrize("lane", ["interactive", "bulk"])
async def test_a_killed_workers_jobs_run_again_once_its_heartbeat_expires(
    settings: Settings,
    service_urls: ServiceUrls,
    client: Client,
    raw_redis: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    lane: str,
) -> None:
    """With a 300 s visibility timeout, a kill -9 used to leave its jobs waiting five minutes (either lane)."""
    monkeypatch.setattr("worker.consumer.HEARTBEAT_TTL_S", 1)  # what the key's expiry stands for here
    settings = settings.model_copy(update={"visibility_timeout_seconds": 300, "reclaim_interval_seconds": 0.1})
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr", lane=lane) for i in range(20))
    doomed_engine = DeterministicEngine(delay_s=60)
    doomed = _worker(settings, service_urls, doomed_engine, name="doomed")
    await doomed.start()
    while doomed_engine.in_flight < 8:
        await asyncio.sleep(0.01)
    assert raw_redis.exists(client.keys.worker("doomed"))
    await _abandon(doomed)
    raw_redis.delete(client.keys.worker("doomed"))  # as its expiry would, TTL seconds after the kill

    survivor = _worker(settings, service_urls, DeterministicEngine())
    await survivor.start()
    try:
        jobs = await wait_all(client, ids)
    finally:
        await survivor.stop(grace_seconds=5)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 20
    assert survivor.consumer.reclaimed == 8
    for stream in (client.keys.jobs_stream, client.keys.bulk_jobs_stream):
        assert raw_redis.xpending(stream, client.keys.consumer_group)["pending"] == 0


async def test_a_draining_worker_keeps_its_heartbeat_until_its_results_are_written(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
) -> None:
    """Others take over a consumer's jobs once its heartbeat is gone, so it must outlive the drain."""
    client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(4))
    engine = DeterministicEngine(delay_s=1.0)
    worker = _worker(settings, service_urls, engine, name="draining")
    await worker.start()
    while engine.in_flight < 4:
        await asyncio.sleep(0.01)
    stopping = asyncio.create_task(worker.stop(grace_seconds=10))
    await asyncio.sleep(0.3)
    assert not stopping.done()
    assert raw_redis.exists(client.keys.worker("draining"))  # still draining: still beating
    assert await stopping == 0
    assert not raw_redis.exists(client.keys.worker("draining"))  # gone: nothing left to take over
