"""bench.pg_writers at a tiny size: K writer processes really write through the worker's upsert, and
what it reports adds up (rows per writer, the rows stored, PostgreSQL's CPU)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from bench.pg_writers import BATCH, parse_counts, parse_usage, prepare, run_writers
from contract.services import ServiceUrls
from storage import libpq_url, upgrade_database
from storage.connection import create_database


@pytest.fixture
def bench_database(service_urls: ServiceUrls) -> Iterator[str]:
    """A database of its own on the test server: the bench empties ``jobs`` before each run."""
    name = f"bench_pg_writers_{os.getpid()}"
    create_database(service_urls.database_url, name)
    url = urlunsplit(urlsplit(libpq_url(service_urls.database_url))._replace(path=f"/{name}"))
    upgrade_database(url)
    prepare(url)
    try:
        yield url
    finally:
        with psycopg.connect(libpq_url(service_urls.database_url), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("usage", ["shared", "per-writer"])
def test_two_writers_write_whole_batches_and_the_server_cpu_is_counted(bench_database: str, usage: str) -> None:
    run = run_writers(bench_database, 2, 0.5, usage)
    assert run["writers"] == 2 and len(run["per_writer_rows_per_s"]) == 2
    assert run["rows"] >= 2 * BATCH and run["rows"] % BATCH == 0
    assert all(rate > 0 for rate in run["per_writer_rows_per_s"])
    assert run["postgres_cpu_us_per_row"] > 0 and run["wal_bytes_per_row"] > 0
    with psycopg.connect(bench_database, autocommit=True) as conn:
        stored = conn.execute("SELECT count(*), count(DISTINCT tenant) FROM jobs").fetchone()
        usage_jobs = conn.execute("SELECT sum(jobs), count(*) FROM usage_daily").fetchone()
    assert stored is not None and usage_jobs is not None
    assert stored[0] == run["rows"] + 2 * BATCH  # each writer's warm-up batch too
    assert stored[1] == (2 if usage == "per-writer" else 0)
    assert usage_jobs == (stored[0], 2 if usage == "per-writer" else 1)


def test_the_options_refuse_what_cannot_run() -> None:
    assert parse_counts("1,2,16") == [1, 2, 16]
    assert parse_usage("per-writer,shared") == ["per-writer", "shared"]
    for bad in ("0", "", "1,-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_counts(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_usage("everyone")
