"""One index for a run's jobs, and none for a tenant's.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

Every job row of a run kept three indexes beside the primary key and the status index:
``jobs_run_status`` (run, status), ``jobs_run_sequence`` (run, line) and ``jobs_tenant_created_at``
(tenant, creation). The worker pays for each on every row it writes, and a job of an OpenAI batch
(a run of a tenant) cost it about a third more than a plain job. No statement reads a tenant's jobs
by tenant (a job is found by id, then its tenant compared), so that index goes. A run's jobs are
read by line (results in input order, the finished prefix of a batch) and counted by status
(progress): ``jobs_run_lines`` (run, line) carrying the status serves both, so the two run indexes
become one.

Built in the migration's transaction, which blocks writes to ``jobs`` while it builds: on a large
table, create it first by hand with CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_run_lines ON
jobs (run_id, sequence) INCLUDE (status) WHERE run_id IS NOT NULL, and this step finds it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``jobs_run_lines``; drop ``jobs_run_sequence``, ``jobs_run_status`` and ``jobs_tenant_created_at``."""
    op.create_index(
        "jobs_run_lines",
        "jobs",
        ["run_id", "sequence"],
        postgresql_include=["status"],
        postgresql_where=sa.text("run_id IS NOT NULL"),
        if_not_exists=True,
    )
    op.drop_index("jobs_run_sequence", table_name="jobs")
    op.drop_index("jobs_run_status", table_name="jobs")
    op.drop_index("jobs_tenant_created_at", table_name="jobs")


def downgrade() -> None:
    """Put the three indexes back and drop ``jobs_run_lines``."""
    op.create_index(
        "jobs_tenant_created_at", "jobs", ["tenant", "created_at"], postgresql_where=sa.text("tenant IS NOT NULL")
    )
    op.create_index("jobs_run_status", "jobs", ["run_id", "status"], postgresql_where=sa.text("run_id IS NOT NULL"))
    op.create_index("jobs_run_sequence", "jobs", ["run_id", "sequence"], postgresql_where=sa.text("run_id IS NOT NULL"))
    op.drop_index("jobs_run_lines", table_name="jobs")
