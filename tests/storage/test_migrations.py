"""The schema comes only from Alembic migrations, and they go up and down cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import psycopg
import pytest
from alembic.script import ScriptDirectory

from contract.services import ServiceUrls
from storage import downgrade_database, upgrade_database
from tests.waiting import wait_for


def _tables_and_indexes(url: str) -> tuple[set[str], set[str]]:
    with psycopg.connect(url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")}
    return tables, indexes


def test_upgrade_downgrade_upgrade(fresh_database: str) -> None:
    upgrade_database(fresh_database)
    tables, indexes = _tables_and_indexes(fresh_database)
    assert {"jobs", "alembic_version", "api_keys"} <= tables
    assert {"jobs_pkey", "jobs_status_created_at", "jobs_run_lines", "jobs_document_sequence"} <= indexes
    assert "api_keys_key_hash_key" in indexes
    assert not {"jobs_run_status", "jobs_run_sequence", "jobs_tenant_created_at"} & indexes  # 0012: one run index

    downgrade_database(fresh_database, "0011")  # 0012 alone: the three indexes it replaced come back
    _, indexes = _tables_and_indexes(fresh_database)
    assert {"jobs_run_status", "jobs_run_sequence", "jobs_tenant_created_at"} <= indexes
    assert "jobs_run_lines" not in indexes
    upgrade_database(fresh_database)

    with psycopg.connect(fresh_database) as conn:
        columns = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'jobs'"
            )
        }
    assert columns["id"] == "uuid" and columns["metadata"] == "jsonb"
    assert columns["created_at"] == "timestamp with time zone"
    for name in (
        "source_lang",
        "target_lang",
        "source_text",
        "translated_text",
        "status",
        "error",
        "attempts",
        "model",
        "prompt_tokens",
        "output_tokens",
        "started_at",
        "finished_at",
        "run_id",
        "document_id",
        "sequence",
        "tenant",
        "finish_reason",
        "pieces",
    ):
        assert name in columns

    tables, _ = _tables_and_indexes(fresh_database)
    assert {"files", "file_chunks", "batches"} <= tables
    downgrade_database(fresh_database, "0005")  # 0006 alone: the Batch API's tables go, the rest stays
    tables, _ = _tables_and_indexes(fresh_database)
    assert not {"files", "file_chunks", "batches"} & tables and "api_keys" in tables

    downgrade_database(fresh_database, "0004")  # 0005 alone: api_keys and jobs.tenant go, the rest stays
    tables, indexes = _tables_and_indexes(fresh_database)
    assert "api_keys" not in tables and "jobs" in tables and "jobs_tenant_created_at" not in indexes

    downgrade_database(fresh_database)
    tables, _ = _tables_and_indexes(fresh_database)
    assert "jobs" not in tables

    upgrade_database(fresh_database)
    upgrade_database(fresh_database)  # a second upgrade is a no-op
    assert "jobs" in _tables_and_indexes(fresh_database)[0]


def test_status_is_constrained(fresh_database: str) -> None:
    upgrade_database(fresh_database)
    with psycopg.connect(fresh_database) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, created_day)"
            " VALUES (gen_random_uuid(), 'exploded', 'en', 'fr', 'x', now(), (now() AT TIME ZONE 'UTC')::date)"
        )


_MIGRATE_AT_THE_SIGNAL = """
import sys, time
from pathlib import Path
import alembic.command, alembic.script, psycopg, sqlalchemy  # loaded before the signal: the upgrades overlap
from cli.main import main

folder, name = Path(sys.argv[1]), sys.argv[2]
(folder / f"ready-{name}").touch()
while not (folder / "go").exists():
    time.sleep(0.01)
sys.exit(main(["db", "upgrade"]))
"""


def test_workers_starting_together_migrate_one_at_a_time(
    fresh_database: str, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    """Every worker migrates at start; three at once used to collide (a unique violation)."""
    env = {**os.environ, "DRAGOMAN_DATABASE_URL": fresh_database, "DRAGOMAN_REDIS_URL": service_urls.redis_url}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATE_AT_THE_SIGNAL, str(tmp_path), str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(3)
    ]
    wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 3, "three migrating processes ready")
    (tmp_path / "go").touch()  # all three start migrating together
    outcomes = [(p.wait(), p.stdout.read().decode() if p.stdout else "") for p in processes]
    assert [code for code, _ in outcomes] == [0, 0, 0], "\n".join(output for _, output in outcomes)
    with psycopg.connect(fresh_database) as conn:
        [(version,)] = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert version == ScriptDirectory(str(files("migrations"))).get_current_head()
