"""The tenant (API key) that submitted each run and document.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

Runs and documents submitted over the HTTP API belong to the caller's tenant, like their jobs
(``jobs.tenant``, 0005): another tenant's run or document id answers "not found". Null means it
came from the Python client or the CLI, which see every group.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``runs.tenant`` and ``documents.tenant`` (nullable: a catalogue change, no rewrite)."""
    op.add_column("runs", sa.Column("tenant", sa.Text(), nullable=True))
    op.add_column("documents", sa.Column("tenant", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop ``runs.tenant`` and ``documents.tenant``."""
    op.drop_column("documents", "tenant")
    op.drop_column("runs", "tenant")
