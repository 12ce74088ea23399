"""Reclaim, retries past max_attempts, dead letters, consumer clean-up and trimming, on a real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio as aioredis

from contract.keys import RedisKeys
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from producer.dead_letters import DeadLetters
from worker.deterministic_engine import DeterministicEngine
from worker.reclaim import forget_gone_consumers, trim_acknowledged
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
        jobs = await wait_all(client, ids, within=30)
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
        jobs = await wait_all(client, ids, within=15)
    finally:
        await again.stop(grace_seconds=5)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 5


async def test_a_job_that_kills_its_worker_is_failed_and_dead_lettered(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
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
        failed, ok = await wait_all(client, [poison, fine], within=15)
    finally:
        await last.stop(grace_seconds=5)
    assert ok.status is JobStatus.SUCCEEDED
    assert failed.status is JobStatus.FAILED and failed.attempts == 2
    assert failed.error and "gave up after 2 deliveries" in failed.error
    [letter] = DeadLetters(raw_redis, settings).entries()
    assert letter.job_id == poison and "gave up" in letter.reason


async def test_an_engine_error_every_time_dead_letters_and_retry_requeues(
    settings: Settings, service_urls: ServiceUrls, client: Client, raw_redis: redis.Redis
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
    dead = DeadLetters(raw_redis, settings)
    [letter] = dead.entries()
    assert letter.job_id == ids[1] and "EngineError" in letter.reason

    assert dead.retry(ids[1]) == ids[1]  # the cause is fixed: run it again
    assert dead.entries() == []
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
