"""Bursts wait, they don't fail: the API's pools queue for a bounded time, sized from settings.

A pool busy past its wait is ``503 server_busy`` with ``Retry-After`` (load, not the "a backing
service is unavailable" of an outage); event streams and ``?wait=`` long polls cannot take the
connections plain requests need; ``/readyz`` keeps one PostgreSQL session for every probe.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest

from api import create_app
from api.services import ApiServices
from contract.settings import Settings
from storage import health
from tests.api.conftest import KeyMaker, bearer, uvicorn_serving
from tests.waiting import FOREVER, until

JOB = {"text": "Hello", "source_lang": "en", "target_lang": "fr"}


@asynccontextmanager
async def serving(settings: Settings, **update: Any) -> AsyncIterator[tuple[httpx.AsyncClient, ApiServices]]:
    """The API on ``settings`` with ``update``, in-process (its lifespan around the block), and its services."""
    app = create_app(settings.model_copy(update=update))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test", timeout=None) as client:
            yield client, app.state.services


async def test_a_burst_on_small_pools_waits_instead_of_failing(settings: Settings, tenant_key: KeyMaker) -> None:
    """300 concurrent requests of one tenant over 4 Redis and 2 PostgreSQL connections: none fails.

    The pools were 32 and 8 connections whatever the settings; redis-py's non-waiting pool failed
    a burst at once (issue 33: 68-272 of 300 requests, and another tenant's 20 of 20).
    """
    busy_key, other_key = tenant_key("busy"), tenant_key("other")
    async with serving(
        settings,
        api_redis_connections=4,
        api_database_connections=2,
        api_file_store_connections=2,
        api_pool_wait_seconds=FOREVER,  # a request waits for a connection however long the burst takes
    ) as (http, services):
        assert services.client.redis.connection_pool.max_connections == 4
        assert services.client.pool.max_connections == 2
        busy_job = (await http.post("/v1/jobs", json=JOB, headers=bearer(busy_key))).json()["id"]
        other_job = (await http.post("/v1/jobs", json=JOB, headers=bearer(other_key))).json()["id"]
        cold_key = tenant_key("busy")  # a key of the same tenant no server has seen: its lookup needs PostgreSQL
        unknown = str(uuid.uuid4())  # not in Redis: looked up in PostgreSQL (404)

        async def get(path: str, key: str) -> int:
            return (await http.get(path, headers=bearer(key))).status_code

        burst = [get(f"/v1/jobs/{busy_job}", cold_key) for _ in range(200)]
        burst += [get(f"/v1/jobs/{unknown}", busy_key) for _ in range(50)]
        burst += [get("/v1/batches", busy_key) for _ in range(50)]
        other = [get(f"/v1/jobs/{other_job}", other_key) for _ in range(20)]
        other += [get("/v1/files", other_key) for _ in range(20)]
        answers = await asyncio.gather(*burst, *other)
    burst_answers, other_answers = answers[: len(burst)], answers[len(burst) :]
    assert [s for s in burst_answers if s >= 500] == []
    assert sorted(set(burst_answers)) == [200, 404]
    assert burst_answers.count(404) == 50
    assert other_answers == [200] * len(other)


async def test_a_busy_redis_pool_is_503_server_busy_with_retry_after(
    settings: Settings, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture
) -> None:
    """All Redis connections held past the wait: 503 server_busy with Retry-After, not an outage, no traceback."""
    key = tenant_key("a")
    async with serving(
        settings, api_redis_connections=2, api_pool_wait_seconds=0.3, api_busy_retry_after_seconds=3
    ) as (http, services):
        job = (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).json()["id"]
        pool = services.client.redis.connection_pool
        held = [await pool.get_connection() for _ in range(pool.max_connections)]
        caplog.clear()
        try:
            with caplog.at_level(logging.WARNING):
                native = await http.get(f"/v1/jobs/{job}", headers=bearer(key))
                openai = await http.get("/v1/models", headers=bearer(key))
        finally:
            for connection in held:
                await pool.release(connection)
        after = await http.get(f"/v1/jobs/{job}", headers=bearer(key))
    assert native.status_code == 503 and native.headers["Retry-After"] == "3"
    error = native.json()["error"]
    assert error["code"] == "server_busy"
    assert "2 Redis connections" in error["message"] and "busy" in error["message"]
    assert openai.status_code == 503 and openai.headers["Retry-After"] == "3"
    assert openai.json()["error"]["code"] == "server_busy" and openai.json()["error"]["type"] == "server_error"
    assert after.status_code == 200
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert any("server_busy" in r.getMessage() for r in caplog.records)  # the operator still sees it


async def test_a_busy_postgres_pool_is_503_server_busy_with_retry_after(
    settings: Settings, tenant_key: KeyMaker
) -> None:
    """The requests' PostgreSQL pool held past the wait: 503 server_busy with Retry-After, then served again."""
    key = tenant_key("a")
    unknown = str(uuid.uuid4())  # not in Redis: its lookup needs PostgreSQL
    async with serving(
        settings, api_database_connections=1, api_pool_wait_seconds=0.3, api_busy_retry_after_seconds=2
    ) as (http, services):
        assert (await http.get(f"/v1/jobs/{unknown}", headers=bearer(key))).status_code == 404
        async with services.client.pool.connection():
            busy = await http.get(f"/v1/jobs/{unknown}", headers=bearer(key))
        after = await http.get(f"/v1/jobs/{unknown}", headers=bearer(key))
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "2"
    assert busy.json()["error"]["code"] == "server_busy"
    assert "1 PostgreSQL connections" in busy.json()["error"]["message"]
    assert after.status_code == 404


async def test_readyz_keeps_one_postgres_session(settings: Settings, pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each /readyz opened (and closed) a PostgreSQL session of its own: 55 probes, 55 sessions."""
    name = f"api-readyz-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(health, "PROBE_APPLICATION_NAME", name)
    opened: list[str] = []
    connect = psycopg.AsyncConnection.connect

    async def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(str(kwargs.get("application_name")))
        return await connect(*args, **kwargs)

    def sessions() -> int:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        return int(pg.execute(query, (name,)).fetchone()[0])  # type: ignore[attr-defined]

    async with serving(settings) as (http, _):
        monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted)
        answers = await asyncio.gather(*(http.get("/readyz") for _ in range(50)))
        for _ in range(5):
            answers.append(await http.get("/readyz"))
        assert {a.status_code for a in answers} == {200}
        assert opened == [name] and sessions() == 1
        # A kept session that dies (a restart, a proxy's idle timeout) is replaced, not reported.
        pg.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,))  # type: ignore[attr-defined]
        assert (await http.get("/readyz")).status_code == 200
        assert len(opened) == 2
    await until(lambda: sessions() == 0, "the kept session ended (closed at shutdown; the backend ends a moment later)")


async def _open_stream(http: httpx.AsyncClient, key: str, opened: list[httpx.Response], release: asyncio.Event) -> int:
    """Open ``GET /v1/events``; an accepted stream is held open until ``release`` is set."""
    async with http.stream("GET", "/v1/events", headers=bearer(key)) as answer:
        if answer.status_code == 200:
            chunks = answer.aiter_bytes()  # kept: a generator left to the collector closes the response
            await anext(chunks)  # the first chunk: the stream is open
            opened.append(answer)
            await release.wait()
            await chunks.aclose()
        else:
            await answer.aread()
            assert answer.json()["error"]["code"] == "too_many_streams" and answer.headers["Retry-After"]
        return answer.status_code


async def test_streams_and_long_polls_do_not_starve_plain_requests(settings: Settings, tenant_key: KeyMaker) -> None:
    """20 event streams and 30 ``?wait=`` long polls at once, 4 Redis connections: the other tenant is served.

    Streams read on a pool of their own, bounded by DRAGOMAN_API_MAX_EVENT_STREAMS (past it: 503
    too_many_streams with Retry-After); a long poll holds no pooled connection while it waits.
    """
    streamer, other = tenant_key("streamer"), tenant_key("other")
    app = create_app(
        settings.model_copy(
            update={"api_redis_connections": 4, "api_max_event_streams": 5, "api_pool_wait_seconds": FOREVER}
        )
    )
    with uvicorn_serving(app) as base:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=base, timeout=None, limits=limits) as http:
            other_job = (await http.post("/v1/jobs", json=JOB, headers=bearer(other))).json()["id"]
            release = asyncio.Event()
            opened: list[httpx.Response] = []
            streams = [asyncio.create_task(_open_stream(http, streamer, opened, release)) for _ in range(20)]
            await until(lambda: len(opened) + sum(t.done() for t in streams) == 20, "20 streams open or refused")
            polls = [http.post("/v1/jobs?wait=2", json=JOB, headers=bearer(streamer)) for _ in range(30)]
            gets = [http.get(f"/v1/jobs/{other_job}", headers=bearer(other)) for _ in range(100)]
            answers = await asyncio.gather(*polls, *gets)
            release.set()
            stream_statuses = await asyncio.gather(*streams)
    assert sorted(stream_statuses) == [200] * 5 + [503] * 15
    assert [a.status_code for a in answers[:30]] == [202] * 30  # no worker: each waited its 2 s
    assert [a.status_code for a in answers[30:]] == [200] * 100
