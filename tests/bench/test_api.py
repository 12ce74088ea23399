"""bench.api's clean-up between measurements: it may empty only servers the benchmark started itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from contract.services import ServiceUrls
from contract.settings import Settings
from storage import libpq_url, upgrade_database


@pytest.fixture
def users_database(service_urls: ServiceUrls, pg: Any) -> Iterator[str]:
    """A database of someone else's, migrated, holding one job row (dropped afterwards)."""
    name = f"bench_{uuid.uuid4().hex[:12]}"
    pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(urlsplit(libpq_url(service_urls.database_url))._replace(path=f"/{name}"))
    try:
        upgrade_database(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, created_day) "
                "VALUES (gen_random_uuid(), 'succeeded', 'en', 'fr', 'a user''s job', now(), "
                "(now() AT TIME ZONE 'UTC')::date)"
            )
        yield url
    finally:
        pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _job_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_reset_state_refuses_to_empty_the_jobs_of_a_configured_database(
    service_urls: ServiceUrls, users_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With DRAGOMAN_REDIS_URL and DRAGOMAN_DATABASE_URL set, bench.api measures on the user's servers
    (``bench.servers.benchmark_servers``): TRUNCATE jobs there would delete every job row of theirs."""
    from bench.api import reset_state

    monkeypatch.setenv("DRAGOMAN_REDIS_URL", service_urls.redis_url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", users_database)
    settings = Settings(
        redis_url=service_urls.redis_url, database_url=users_database, key_prefix=f"bench-{uuid.uuid4().hex[:8]}"
    )
    with pytest.raises(SystemExit, match="TRUNCATE jobs"):
        reset_state(settings)
    assert _job_rows(users_database) == 1  # the user's row is still there

    reset_state(settings, truncate_configured=True)  # asked for in so many words (--truncate-jobs)
    assert _job_rows(users_database) == 0


def test_bench_api_refuses_a_configured_database_before_measuring(
    service_urls: ServiceUrls, users_database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal comes first (exit 2), not after minutes of measurement."""
    import bench.api

    monkeypatch.setenv("DRAGOMAN_REDIS_URL", service_urls.redis_url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", users_database)
    monkeypatch.setattr("sys.argv", ["bench.api"])
    monkeypatch.setattr(bench.api, "run", lambda *a, **k: pytest.fail("measured on a database it may not empty"))
    with pytest.raises(SystemExit) as exited:
        bench.api.main()
    assert exited.value.code == 2 and "--truncate-jobs" in capsys.readouterr().err
    assert _job_rows(users_database) == 1
