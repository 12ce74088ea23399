"""Call a job's run ``run_id``, as the code, the wire format and the docs do.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Rename ``jobs.batch_id`` and its index (a catalogue change: no rows are rewritten)."""
    op.alter_column("jobs", "batch_id", new_column_name="run_id")
    op.execute("ALTER INDEX jobs_batch_status RENAME TO jobs_run_status")


def downgrade() -> None:
    """Back to ``batch_id``."""
    op.execute("ALTER INDEX jobs_run_status RENAME TO jobs_batch_status")
    op.alter_column("jobs", "run_id", new_column_name="batch_id")
