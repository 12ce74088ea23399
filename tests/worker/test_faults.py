"""Fault injection: kill -9 workers, restart Redis, lose a worker of two; nothing is lost or doubled.

Workers run as real processes (``tests.worker.worker_process``, the deterministic engine with a
per-job delay) against real Redis and PostgreSQL, and are killed with SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from contract.schemas import TranslationRequest
from contract.settings import Settings
from producer.client import Client
from storage import upgrade_database
from storage.embedded import EmbeddedServices
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


def _env(settings: Settings) -> dict[str, str]:
    assert settings.redis_url and settings.database_url
    return {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_VISIBILITY_TIMEOUT_SECONDS": "1",
        "DRAGOMAN_RECLAIM_INTERVAL_SECONDS": "0.2",
        "DRAGOMAN_READ_BLOCK_MS": "50",
        "DRAGOMAN_WRITER_FLUSH_MS": "2",
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_METRICS_HOST": "127.0.0.1",
        # A job may be running at every kill below; these are not poison jobs.
        "DRAGOMAN_MAX_ATTEMPTS": "20",
    }


def _spawn(settings: Settings, log: Path, delay: float = 0.1, max_in_flight: int = 32) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.worker.worker_process", str(delay), str(max_in_flight)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(settings),
            cwd=Path(__file__).parents[2],
        )


def _wait_for_rows(pg: Any, ids: list[str]) -> None:
    wait_for(lambda: _rows_done(pg, ids) >= len(ids), f"a row for each of {len(ids)} jobs")


def _rows_done(pg: Any, ids: list[str]) -> int:
    return int(pg.execute("SELECT count(*) FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)).fetchone()[0])


def _wait_for_progress(pg: Any, ids: list[str], at_least: int) -> int:
    """Block until ``at_least`` rows are done, so a kill lands mid-run on a slow or a fast machine."""
    return wait_for(lambda: (done := _rows_done(pg, ids)) >= at_least and done, f"{at_least} rows", every=0.02)


def _assert_exactly_once(pg: Any, raw: redis.Redis, client: Client, ids: list[str], texts: list[str]) -> None:
    rows = pg.execute(
        "SELECT id::text, status, translated_text FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)
    ).fetchall()
    assert len(rows) == len(ids) == len({r[0] for r in rows})  # every id once, none lost
    by_id = {r[0]: r for r in rows}
    for job_id, text in zip(ids, texts, strict=True):
        _, status, translation = by_id[job_id]
        assert status == "succeeded"
        assert translation.startswith(text + " #")  # one coherent result, from one worker
    assert raw.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
    events = {fields["id"] for _, fields in raw.xrange(client.keys.events_stream)}
    assert events == set(ids)


def test_kill_dash_nine_repeatedly_while_2000_jobs_flow(
    settings: Settings, client: Client, raw_redis: redis.Redis, pg: Any, tmp_path: Path
) -> None:
    rng = random.Random(2026)
    texts = [f"job number {i} " + "x" * rng.randint(0, 80) for i in range(2000)]
    ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
    log = tmp_path / "workers.log"
    progress = []
    for _ in range(4):
        worker = _spawn(settings, log)
        # Kill once this worker has committed something, at a random point of its run.
        _wait_for_progress(pg, ids, (progress[-1] if progress else 0) + 20)
        time.sleep(rng.uniform(0.0, 0.3))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        progress.append(_rows_done(pg, ids))
    assert progress[-1] < 2000, f"the kills came too late to test anything: {progress}"
    final = _spawn(settings, log)
    try:
        _wait_for_rows(pg, ids)
    finally:
        final.send_signal(signal.SIGTERM)
        assert final.wait(timeout=60) == 0, log.read_text()[-3000:]
    _assert_exactly_once(pg, raw_redis, client, ids, texts)
    print(f"rows done after each kill: {progress}")


def test_two_workers_one_killed_the_other_finishes_everything(
    settings: Settings, client: Client, raw_redis: redis.Redis, pg: Any, tmp_path: Path
) -> None:
    texts = [f"sentence {i}" for i in range(600)]
    ids = client.submit_many(TranslationRequest(t, "en", "de") for t in texts)
    log = tmp_path / "workers.log"
    doomed, survivor = _spawn(settings, log), _spawn(settings, log)
    try:
        # Not a fixed sleep: two workers can finish all 600 jobs in 1.5 s on a fast machine.
        _wait_for_progress(pg, ids, 60)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        assert _rows_done(pg, ids) < 600
        _wait_for_rows(pg, ids)
    finally:
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=60) == 0, log.read_text()[-3000:]
    _assert_exactly_once(pg, raw_redis, client, ids, texts)


@pytest.fixture
def own_services(tmp_path: Path) -> Iterator[EmbeddedServices]:
    """Servers of this test's own, so it can restart Redis (append-only file on)."""
    services = EmbeddedServices(tmp_path / "own")
    upgrade_database(services.up().database_url)
    yield services
    services.down()


def test_redis_restart_mid_run_loses_nothing(
    own_services: EmbeddedServices, settings: Settings, tmp_path: Path
) -> None:
    import psycopg

    urls = own_services.up()
    settings = settings.model_copy(update={"redis_url": urls.redis_url, "database_url": urls.database_url})
    texts = [f"before the restart {i}" for i in range(800)]
    log = tmp_path / "worker.log"
    with Client(settings) as client, psycopg.connect(urls.database_url, autocommit=True) as pg:
        ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
        worker = _spawn(settings, log, delay=0.05)
        try:
            while _rows_done(pg, ids) < 100:
                time.sleep(0.05)
            own_services._stop_redis()  # queued and pending entries are in the append-only file
            time.sleep(1.0)
            assert own_services.up().redis_url == urls.redis_url
            _wait_for_rows(pg, ids)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0, log.read_text()[-3000:]
        raw = redis.Redis.from_url(urls.redis_url, decode_responses=True)
        rows = pg.execute("SELECT status, translated_text FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
        assert len(rows) == 800 and {r[0] for r in rows} == {"succeeded"}
        assert raw.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
        assert "Redis unavailable" in log.read_text()  # it noticed, waited, and carried on
        raw.close()
