"""Fixtures for the worker's own tests: a real Redis and PostgreSQL, a deterministic engine."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from broker.keys import shard_tag
from contract.errors import JobNotFoundError
from contract.schemas import Job, JobStatus
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage.embedded_cluster import EmbeddedCluster
from tests.waiting import until
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile, PromptProfile
from worker.service import Worker

WorkerFactory = Callable[..., Any]


def default_model_worker(settings: Settings, urls: ServiceUrls, engine: Any, *, max_in_flight: int) -> Worker:
    """A worker on a real engine serving the default model, with the prompt profile that model gets."""
    from worker.model import prepare_default_model
    from worker.profiles import choose_profile

    profile = choose_profile(None, prepare_default_model(settings.model_cache_dir), engine.tokenizer)
    return Worker(
        settings,
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=profile,
        max_in_flight=max_in_flight,
    )


def identity_worker(
    settings: Settings,
    urls: ServiceUrls,
    engine: DeterministicEngine,
    *,
    max_in_flight: int = 16,
    consumer_name: str | None = None,
    profile: PromptProfile | None = None,
    model_path: Path | None = None,
) -> Worker:
    """A worker on the deterministic engine with the identity profile (translation == text), or ``profile``."""
    return Worker(
        settings,
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=profile if profile is not None else IdentityProfile(engine.tokenizer),
        max_in_flight=max_in_flight,
        consumer_name=consumer_name,
        model_path=model_path,
    )


def _get(client: Client, job_id: str) -> Job:
    """The job, or a stand-in "queued" one while a plain-XADD job has no state record yet."""
    try:
        return client.get(job_id)
    except JobNotFoundError:
        return Job(id=job_id, status=JobStatus.QUEUED)


@pytest.fixture
def start_worker(settings: Settings, service_urls: ServiceUrls) -> WorkerFactory:
    """``async with start_worker(engine, max_in_flight=...) as worker:`` runs a worker, then stops it."""

    @asynccontextmanager
    async def factory(
        engine: DeterministicEngine, *, max_in_flight: int = 16, settings_: Settings | None = None
    ) -> AsyncIterator[Worker]:
        worker = identity_worker(settings_ or settings, service_urls, engine, max_in_flight=max_in_flight)
        await worker.start()
        try:
            yield worker
        finally:
            await worker.stop(grace_seconds=5)

    return factory


def _get_all(client: Client, ids: list[str]) -> list[Job]:
    return [_get(client, i) for i in ids]


async def wait_all(client: Client, ids: list[str]) -> list[Job]:
    """Poll (without blocking the loop) until every job is final, however long that takes; return them in order."""
    pending = list(ids)

    async def all_final() -> bool:
        nonlocal pending
        jobs = await asyncio.to_thread(_get_all, client, pending)
        pending = [j.id for j in jobs if not j.status.is_final]
        return not pending

    await until(all_final, f"{len(ids)} jobs final")
    return [client.get(i) for i in ids]


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """A Redis Cluster (3 primaries, 3 replicas) of this test's own: for a test that kills one of its primaries."""
    embedded = EmbeddedCluster(tmp_path / "cluster")
    embedded.up()
    try:
        yield embedded
    finally:
        embedded.down()


def spread_prefix(cluster: EmbeddedCluster, shards: int) -> str:
    """A key prefix whose ``shards`` shard tags hash to ``shards`` different primaries (a kill hits one shard)."""
    primaries = [node for node in cluster.nodes() if node.role == "primary"]
    while True:
        prefix = f"test-{uuid.uuid4().hex[:8]}"
        owners = set()
        for shard in range(shards):
            slot = key_slot(shard_tag(prefix, shard).encode())
            owners |= {node.port for node in primaries if node.serves(slot)}
        if len(owners) == shards:
            return prefix
