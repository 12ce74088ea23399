"""Quality flags on every finished translation (issue 34).

Revision ID: 0018
Revises: 0014
Create Date: 2026-11-25

``jobs.quality_flags``: what the worker's weight-free checks found wrong with a translation, as
``{flag: evidence}`` (:mod:`contract.quality`); ``{}`` for a clean one, null for a row never
checked (failed, cancelled, raw-prompt, or written before this revision). A nullable column with
no default: adding it rewrites nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``jobs.quality_flags``."""
    op.add_column("jobs", sa.Column("quality_flags", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    """Drop ``jobs.quality_flags``."""
    op.drop_column("jobs", "quality_flags")
