"""The schema comes only from Alembic migrations, and they go up and down cleanly."""

from __future__ import annotations

import psycopg
import pytest

from storage import downgrade_database, upgrade_database


def _tables_and_indexes(url: str) -> tuple[set[str], set[str]]:
    with psycopg.connect(url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")}
    return tables, indexes


def test_upgrade_downgrade_upgrade(fresh_database: str) -> None:
    upgrade_database(fresh_database)
    tables, indexes = _tables_and_indexes(fresh_database)
    assert {"jobs", "alembic_version"} <= tables
    assert {"jobs_pkey", "jobs_status_created_at", "jobs_run_status", "jobs_document_sequence"} <= indexes

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
    ):
        assert name in columns

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
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at)"
            " VALUES (gen_random_uuid(), 'exploded', 'en', 'fr', 'x', now())"
        )
