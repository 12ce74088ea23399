"""A cancel is final: however late a worker reaches the job, and whichever worker does, it is not run."""

from __future__ import annotations

import asyncio
import time

import redis

from broker.scripts import CancelOutcome
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine

from .conftest import WorkerFactory, identity_worker, wait_all
from .test_reclaim import _abandon


async def test_a_cancel_holds_for_a_backlog_older_than_the_finished_ttl(
    raw_redis: redis.Redis, settings: Settings, start_worker: WorkerFactory
) -> None:
    settings = settings.model_copy(update={"finished_state_ttl_seconds": 1})
    with Client(settings) as client:
        keep, drop = client.submit_many(
            [TranslationRequest("keep", "en", "fr"), TranslationRequest("drop", "en", "fr")]
        )
        assert client.run(client.core.submitter.cancel(drop)) is CancelOutcome.CANCELLED
        await asyncio.sleep(1.5)  # longer than a final state record is kept: the worker comes late
        assert client.get(drop).status is JobStatus.CANCELLED  # still answered from Redis
        engine = DeterministicEngine()
        async with start_worker(engine, settings_=settings):
            kept, dropped = await wait_all(client, [keep, drop])
    assert kept.status is JobStatus.SUCCEEDED
    assert dropped.status is JobStatus.CANCELLED and dropped.translation is None
    assert engine.requests == 1
    ttl = int(raw_redis.ttl(client.keys.state(drop)))  # type: ignore[arg-type]
    assert 0 < ttl <= 1 or not raw_redis.exists(client.keys.state(drop))  # the worker finalised it: now it may go


async def test_a_job_cancelled_while_its_worker_is_dead_is_not_run_by_the_one_that_reclaims_it(
    client: Client, raw_redis: redis.Redis, settings: Settings, service_urls: ServiceUrls
) -> None:
    settings = settings.model_copy(update={"visibility_timeout_seconds": 0.3, "reclaim_interval_seconds": 0.1})
    job_id = client.submit("slow", "en", "fr")
    doomed_engine = DeterministicEngine(delay_s=60)
    doomed = identity_worker(settings, service_urls, doomed_engine, consumer_name="doomed")
    await doomed.start()
    while doomed_engine.in_flight < 1:
        await asyncio.sleep(0.01)
    await _abandon(doomed)
    assert client.run(client.core.submitter.cancel(job_id)) is CancelOutcome.CANCEL_REQUESTED  # nobody hears it

    engine = DeterministicEngine()
    survivor = identity_worker(settings, service_urls, engine)
    await survivor.start()
    started = time.monotonic()
    try:
        [job] = await wait_all(client, [job_id])
    finally:
        await survivor.stop(grace_seconds=5)
    assert survivor.consumer.reclaimed == 1 and time.monotonic() - started < 15
    assert job.status is JobStatus.CANCELLED and job.translation is None
    assert engine.requests == 0
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
