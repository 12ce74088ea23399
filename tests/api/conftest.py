"""Fixtures of the HTTP API tests: the app on the test servers, an ASGI client, API keys, a worker."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from api import create_app
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from storage import ApiKeyStore, AsyncConnectionPool
from tests.waiting import FOREVER, wait_for
from tests.worker.conftest import start_worker

__all__ = ["start_worker"]

KeyMaker = Callable[..., str]


@pytest.fixture
async def key_store(settings: Settings) -> AsyncIterator[ApiKeyStore]:
    """The ``api_keys`` table of the test database, on a pool closed after the test."""
    assert settings.database_url
    pool = AsyncConnectionPool(settings.database_url, max_connections=2)
    yield ApiKeyStore(pool)
    await pool.close()


@pytest.fixture
def make_key(settings: Settings) -> Iterator[KeyMaker]:
    """``make_key(tenant, rate_limit_per_minute=None, max_queued_jobs=None)`` creates a key; returns the secret.

    Synchronous, for use anywhere in a test: the store runs on a loop thread of its own (the sync bridge).
    """
    assert settings.database_url
    loop = LoopThread("make-key")
    pool = AsyncConnectionPool(settings.database_url, max_connections=1)
    store = ApiKeyStore(pool)

    def make(tenant: str, rate_limit_per_minute: int | None = None, max_queued_jobs: int | None = None) -> str:
        created = store.create(
            f"{tenant}-{settings.key_prefix}",
            tenant=tenant,
            rate_limit_per_minute=rate_limit_per_minute,
            max_queued_jobs=max_queued_jobs,
        )
        return loop.run(created)[1]

    try:
        yield make
    finally:
        loop.run(pool.close())
        loop.close()


WAIT = f"wait={FOREVER:.0f}"
"""The query of a submit that waits for its job to finish, however long that takes (on the settings of
:func:`with_unlimited_wait`: the API cuts a longer ``?wait=`` to ``api_max_wait_seconds``)."""


def with_unlimited_wait(settings: Settings) -> Settings:
    """``settings`` whose API lets ``?wait=`` wait as long as a submit asks (a test waits for its job, not 60 s)."""
    return settings.model_copy(update={"api_max_wait_seconds": FOREVER})


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    """The API application on the test servers (this test's key prefix); ``?wait=`` is not cut."""
    return create_app(with_unlimited_wait(settings))


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to ``app`` in-process (its lifespan run around the test)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
            yield client


def bearer(key: str) -> dict[str, str]:
    """The Authorization header for ``key``."""
    return {"Authorization": f"Bearer {key}"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def uvicorn_serving(app: FastAPI) -> Iterator[str]:
    """``app`` served by uvicorn in a thread (streaming answers and raw sockets need a real server); its base URL."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), "the API started (or its thread ended)", every=0.02)
    assert server.started, "the API did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


@pytest.fixture
def api_url(settings: Settings) -> Iterator[str]:
    """The API served by uvicorn in a thread (a small file limit, to test it; ``?wait=`` not cut); its base URL."""
    with uvicorn_serving(
        create_app(with_unlimited_wait(settings).model_copy(update={"max_file_bytes": 64 * 1024}))
    ) as url:
        yield url


@pytest.fixture
def tenant_key(make_key: KeyMaker) -> KeyMaker:
    """``tenant_key(name)``: a key of a tenant of this test's own (the database outlives tests)."""
    suffix = uuid.uuid4().hex[:8]
    return lambda name, **kwargs: make_key(f"{name}-{suffix}", **kwargs)
