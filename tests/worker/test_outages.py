"""PostgreSQL going away mid-run: the worker holds its results, acks nothing, and resumes by itself."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import redis

from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from producer.client import Client
from storage import upgrade_database
from storage.embedded import EmbeddedServices
from worker.deterministic_engine import DeterministicEngine

from .conftest import identity_worker, wait_all


async def test_postgres_outage_holds_results_until_it_returns(tmp_path: Path) -> None:
    services = EmbeddedServices(tmp_path / "own")  # this test stops its own PostgreSQL
    urls = services.up()
    upgrade_database(urls.database_url)
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        data_dir=tmp_path / "own",
        key_prefix=f"outage-{uuid.uuid4().hex[:8]}",
        writer_flush_ms=2,
        read_block_ms=50,
    )
    raw = redis.Redis.from_url(urls.redis_url, decode_responses=True)
    engine = DeterministicEngine()
    worker = identity_worker(settings, urls, engine, max_in_flight=16)
    try:
        with Client(settings) as client:
            ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(50))
            services._stop_postgres()
            await worker.start()
            while engine.requests < 50:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)  # the writer is retrying by now
            pending = raw.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"]
            assert pending == 50  # translated, but not one acknowledged without its row
            assert raw.xlen(client.keys.events_stream) == 0
            assert {raw.hget(client.keys.state(i), "status") for i in ids} == {"running"}

            services.up()  # PostgreSQL is back
            jobs = await wait_all(client, ids)
            assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 50
            assert raw.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
    finally:
        await worker.stop(grace_seconds=5)
        raw.close()
        services.down()
