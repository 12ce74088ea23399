"""The worker's /metrics, /healthz and /readyz, read over HTTP as Prometheus and a kubelet would."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from contract.errors import ConfigurationError
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.version import dragoman_version
from producer.client import Client
from storage import health, upgrade_database
from storage.embedded import EmbeddedServices
from worker import ops_server
from worker.deterministic_engine import DeterministicEngine
from worker.metrics import WorkerMetrics
from worker.ops_server import OpsServer
from worker.service import Worker

from .conftest import WorkerFactory, identity_worker, wait_all


async def http_get(port: int, path: str, method: str = "GET", raw: bytes | None = None) -> tuple[int, str]:
    """One request to the worker's port; the status code and the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw if raw is not None else f"{method} {path} HTTP/1.1\r\nHost: worker\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def port_of(worker: Worker) -> int:
    assert worker.ops is not None and worker.ops.port is not None
    return worker.ops.port


async def test_metrics_count_what_the_rows_say(
    start_worker: WorkerFactory, client: Client, pg: Any, settings: Settings
) -> None:
    engine = DeterministicEngine(fail_if=lambda text: text.startswith("boom"))
    good = client.submit_many(TranslationRequest(f"sentence {i}", "en", "fr") for i in range(40))
    bad = client.submit_many(TranslationRequest(f"boom {i}", "en", "fr") for i in range(3))
    cancelled = client.submit("never runs", "en", "fr")
    client.cancel(cancelled)
    async with start_worker(engine) as worker:
        await wait_all(client, [*good, *bad, cancelled])
        status, body = await http_get(port_of(worker), "/metrics")
    assert status == 200
    values = samples(body)
    rows = dict(
        pg.execute(
            "SELECT status, count(*) FROM jobs WHERE id = ANY(%s::uuid[]) GROUP BY status", ([*good, *bad, cancelled],)
        ).fetchall()
    )
    assert rows == {"succeeded": 40, "failed": 3, "cancelled": 1}
    for status_name, count in rows.items():
        assert values[("dragoman_jobs_total", (("status", status_name),))] == count
    tokens = pg.execute(
        "SELECT sum(prompt_tokens), sum(output_tokens) FROM jobs WHERE id = ANY(%s::uuid[])", (good,)
    ).fetchone()
    assert values[("dragoman_prompt_tokens_total", ())] == tokens[0]
    assert values[("dragoman_output_tokens_total", ())] == tokens[1]
    # Every committed job has an end-to-end and a write sample; the cancelled one never ran the engine.
    assert values[("dragoman_job_stage_seconds_count", (("stage", "end_to_end"),))] == 44
    assert values[("dragoman_job_stage_seconds_count", (("stage", "write"),))] == 44
    assert values[("dragoman_job_stage_seconds_count", (("stage", "engine"),))] == 43
    assert values[("dragoman_writer_batch_size_sum", ())] == 44
    assert values[("dragoman_dead_lettered_total", ())] == 3  # engine errors past max_attempts are dead-lettered
    assert values[("dragoman_dead_letters", ())] == 3
    assert values[("dragoman_group_pending", ())] == 0
    assert values[("dragoman_group_lag", ())] == 0
    assert values[("dragoman_jobs_in_flight", ())] == 0
    assert values[("dragoman_queue_jobs_per_second", ())] == pytest.approx(44 / 60)


async def test_queue_gauges_show_a_backlog(start_worker: WorkerFactory, client: Client) -> None:
    engine = DeterministicEngine(delay_s=30)  # every job stays in the engine
    ids = client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(50))
    async with start_worker(engine, max_in_flight=8) as worker:
        while engine.requests < 8:
            await asyncio.sleep(0.01)
        _, body = await http_get(port_of(worker), "/metrics")
        values = samples(body)
        assert values[("dragoman_stream_length", ())] == 50
        assert values[("dragoman_group_pending", ())] == 8
        assert values[("dragoman_group_lag", ())] == 42
        assert values[("dragoman_jobs_in_flight", ())] == 8
        assert values[("dragoman_oldest_pending_age_seconds", ())] > 0
        for job_id in ids:
            client.cancel(job_id)


async def test_health_endpoints_and_http_errors(start_worker: WorkerFactory) -> None:
    async with start_worker(DeterministicEngine()) as worker:
        port = port_of(worker)
        status, body = await http_get(port, "/healthz")
        assert status == 200 and body.endswith("\n")
        assert json.loads(body) == {"alive": True, "version": dragoman_version()}
        status, body = await http_get(port, "/readyz?verbose=1")
        assert status == 200
        assert json.loads(body) == {"ready": True, "checks": {"engine": "ok", "redis": "ok", "postgres": "ok"}}
        assert (await http_get(port, "/nope"))[0] == 404
        assert (await http_get(port, "/metrics", method="POST"))[0] == 405
        assert (await http_get(port, "", raw=b"garbage\r\n\r\n"))[0] == 400
        stopping = asyncio.create_task(worker.stop(grace_seconds=5))
        await asyncio.sleep(0)  # stop() has begun: the worker is draining
        readiness = await worker.ops.readiness() if worker.ops else None
        assert readiness is not None and readiness.checks["engine"].startswith("draining")
        await stopping


async def test_busy_port_is_a_clear_error(settings: Settings, service_urls: ServiceUrls) -> None:
    first = identity_worker(settings, service_urls, DeterministicEngine())
    await first.start()
    try:
        taken = settings.model_copy(update={"metrics_port": port_of(first)})
        second = identity_worker(taken, service_urls, DeterministicEngine())
        with pytest.raises(ConfigurationError, match="DRAGOMAN_METRICS_PORT"):
            await second.start()
        await second.stop(grace_seconds=1)
    finally:
        await first.stop(grace_seconds=1)


async def test_the_bound_port_is_written_where_an_engine_group_reads_it(
    settings: Settings, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    port_file = tmp_path / "e0.port"
    told = settings.model_copy(update={"metrics_port": 0, "ops_port_file": port_file})
    worker = identity_worker(told, service_urls, DeterministicEngine())
    await worker.start()
    try:
        written, names = await asyncio.to_thread(lambda: (port_file.read_text(), [p.name for p in tmp_path.iterdir()]))
        assert written == f"{port_of(worker)}\n"
        assert names == ["e0.port"]  # no partial file left
        assert (await http_get(port_of(worker), "/healthz"))[0] == 200
    finally:
        await worker.stop(grace_seconds=1)


async def test_metrics_can_be_switched_off(settings: Settings, service_urls: ServiceUrls) -> None:
    worker = identity_worker(
        settings.model_copy(update={"metrics_enabled": False}), service_urls, DeterministicEngine()
    )
    await worker.start()
    await worker.stop(grace_seconds=1)
    assert worker.ops is None


async def test_readyz_follows_redis_going_away_and_coming_back(tmp_path: Path) -> None:
    services = EmbeddedServices(tmp_path / "own")  # this test stops its own Redis
    urls = services.up()
    upgrade_database(urls.database_url)
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        data_dir=tmp_path / "own",
        key_prefix=f"ready-{uuid.uuid4().hex[:8]}",
        read_block_ms=50,
        metrics_port=0,
        metrics_host="127.0.0.1",
    )
    worker = identity_worker(settings, urls, DeterministicEngine())
    await worker.start()
    try:
        port = port_of(worker)
        assert (await http_get(port, "/readyz"))[0] == 200
        services._stop_redis()
        for _ in range(50):  # a check is reused for CHECK_CACHE_S
            status, body = await http_get(port, "/readyz")
            if status == 503:
                break
            await asyncio.sleep(0.1)
        assert status == 503
        checks = json.loads(body)["checks"]
        assert checks["redis"].startswith("Redis at") and checks["postgres"] == "ok" and checks["engine"] == "ok"
        assert (await http_get(port, "/healthz"))[0] == 200  # alive, just not ready
        assert (await http_get(port, "/metrics"))[0] == 200  # served with the last queue gauges
        services.up()
        for _ in range(50):
            if (await http_get(port, "/readyz"))[0] == 200:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("/readyz did not turn ready after Redis came back")
        with Client(settings) as client:  # and the worker works again
            job_id = client.submit("back again", "en", "fr")
            assert [j.status for j in await wait_all(client, [job_id])] == [JobStatus.SUCCEEDED]
    finally:
        await worker.stop(grace_seconds=5)
        services.down()


def _ops(settings: Settings, redis_url: str, database_url: str) -> OpsServer:
    return OpsServer(
        settings, redis_url=redis_url, database_url=database_url, metrics=WorkerMetrics(), engine_state=lambda: "ok"
    )


async def test_a_flood_of_probes_uses_one_postgres_connection(
    settings: Settings, service_urls: ServiceUrls, pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each /readyz opened a PostgreSQL connection of its own: a flood of probes used up the server's."""
    name = f"readyz-{uuid.uuid4().hex[:8]}"  # this test's sessions only, in pg_stat_activity
    monkeypatch.setattr(health, "PROBE_APPLICATION_NAME", name)
    opened: list[str] = []
    connect = psycopg.AsyncConnection.connect

    async def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(str(kwargs.get("application_name")))
        return await connect(*args, **kwargs)

    def sessions() -> int:
        return int(
            pg.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()[0]
        )

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted)
    monkeypatch.setattr(ops_server, "PROBE_TIMEOUT_S", 30.0)  # about connections, not speed: a loaded CI host is slow
    ops = _ops(settings, service_urls.redis_url, service_urls.database_url)
    await ops.start()
    try:
        assert ops.port is not None
        answers = await asyncio.gather(*(http_get(ops.port, "/readyz") for _ in range(100)))
        assert {status for status, _ in answers} == {200}
        assert opened == [name] and sessions() == 1  # one connection for the whole flood
        monkeypatch.setattr(ops_server, "CHECK_CACHE_S", 0.0)  # every probe checks again from here on
        for _ in range(3):
            assert (await http_get(ops.port, "/readyz"))[0] == 200
        assert len(opened) == 1  # and it is kept between checks
        # A kept connection that dies (a PostgreSQL restart, a proxy's idle timeout) is replaced, not reported.
        pg.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,))
        assert (await ops.readiness()).checks["postgres"] == "ok"
        assert len(opened) == 2
    finally:
        await ops.close()
    for _ in range(100):  # the server ends a closed session's backend a moment later
        if sessions() == 0:
            break
        await asyncio.sleep(0.05)
    assert sessions() == 0


async def test_concurrent_scrapes_share_one_queue_refresh(
    settings: Settings, service_urls: ServiceUrls, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    read = ops_server.read_queue_stats

    async def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return await read(*args, **kwargs)

    monkeypatch.setattr(ops_server, "read_queue_stats", counted)
    # One refresh for the whole burst even when a loaded host spreads it over more than a second.
    monkeypatch.setattr(ops_server, "CHECK_CACHE_S", 60.0)
    ops = _ops(settings, service_urls.redis_url, service_urls.database_url)
    await ops.start()
    try:
        assert ops.port is not None
        answers = await asyncio.gather(*(http_get(ops.port, "/metrics") for _ in range(50)))
        assert {status for status, _ in answers} == {200}
        assert reads == [1]
    finally:
        await ops.close()


async def test_readyz_shows_no_credentials(settings: Settings) -> None:
    """Passwords given as query parameters were shown by /readyz's failing checks."""
    ops = _ops(
        settings,
        "redis://127.0.0.1:1/0?password=hunter2",
        "postgresql://app:hunter2@127.0.0.1:1/x?sslpassword=hunter2&password=hunter2",
    )
    try:
        readiness = await ops.readiness()
    finally:
        await ops.close()
    assert not readiness.ready
    assert readiness.checks["redis"].startswith("Redis at redis://127.0.0.1:1/0?password=*** unreachable")
    assert "hunter2" not in readiness.to_json()


def test_the_ops_server_listens_on_loopback_unless_told_otherwise() -> None:
    assert Settings.model_construct().metrics_host == "127.0.0.1"


def test_stage_histogram_buckets_are_cumulative_and_inclusive() -> None:
    metrics = WorkerMetrics()
    metrics.stage_seconds.observe_many("engine", [0.005, 0.3, 0.3, 5000.0])
    metrics.stage_seconds.observe_many("engine", [0.004])
    samples = {
        (s.name, s.labels.get("le")): s.value
        for family in metrics.registry.collect()
        if family.name == "dragoman_job_stage_seconds"
        for s in family.samples
        if s.labels.get("stage") == "engine"
    }
    assert samples[("dragoman_job_stage_seconds_bucket", "0.005")] == 2  # le: a value on the bound counts
    assert samples[("dragoman_job_stage_seconds_bucket", "0.25")] == 2
    assert samples[("dragoman_job_stage_seconds_bucket", "0.5")] == 4
    assert samples[("dragoman_job_stage_seconds_bucket", "3600.0")] == 4
    assert samples[("dragoman_job_stage_seconds_bucket", "+Inf")] == 5
    assert samples[("dragoman_job_stage_seconds_count", None)] == 5
    assert samples[("dragoman_job_stage_seconds_sum", None)] == pytest.approx(5000.609)
