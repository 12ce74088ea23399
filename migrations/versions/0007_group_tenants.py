"""The tenant (API key) that submitted each run and document, and each key's queued-job limit.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

Runs and documents submitted over the HTTP API belong to the caller's tenant, like their jobs
(``jobs.tenant``, 0005): another tenant's run or document id answers "not found". Null means it
came from the Python client or the CLI, which see every group. ``api_keys.max_queued_jobs``
overrides ``DRAGOMAN_API_MAX_QUEUED_JOBS`` for one key.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``runs.tenant``, ``documents.tenant``, ``api_keys.max_queued_jobs`` (nullable: no rewrite), an index."""
    op.add_column("runs", sa.Column("tenant", sa.Text(), nullable=True))
    op.add_column("documents", sa.Column("tenant", sa.Text(), nullable=True))
    op.add_column("api_keys", sa.Column("max_queued_jobs", sa.Integer(), nullable=True))
    op.create_check_constraint("api_keys_queued_positive", "api_keys", "max_queued_jobs IS NULL OR max_queued_jobs > 0")
    # A run's results are read a page at a time in input order (GET /v1/runs/{id}/results). Built
    # in the migration's transaction (its lock keeps concurrent migrators apart), which blocks
    # writes to jobs while it builds: on a large table, create it first by hand with
    # CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_run_sequence ON jobs (run_id, sequence)
    # WHERE run_id IS NOT NULL, and this step finds it.
    op.create_index(
        "jobs_run_sequence",
        "jobs",
        ["run_id", "sequence"],
        postgresql_where=sa.text("run_id IS NOT NULL"),
        if_not_exists=True,
    )


def downgrade() -> None:
    """Drop the results index, ``api_keys.max_queued_jobs``, ``runs.tenant`` and ``documents.tenant``."""
    op.drop_index("jobs_run_sequence", table_name="jobs", if_exists=True)
    op.drop_constraint("api_keys_queued_positive", "api_keys")
    op.drop_column("api_keys", "max_queued_jobs")
    op.drop_column("documents", "tenant")
    op.drop_column("runs", "tenant")
