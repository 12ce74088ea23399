"""Record how each job's generation ended and how many pieces it took (issue 16).

``finish_reason`` is the engine's: ``stop``, ``length`` (the output budget ran out: such a job is
failed, never succeeded), ``abort``. ``pieces`` counts the engine requests of a job whose long
text was cut into pieces inside the worker (1 for a text that fit one generation). Both are
null on rows written before this migration and on jobs that never reached the engine.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add two nullable columns (a catalogue change: no rows are rewritten)."""
    op.add_column("jobs", sa.Column("finish_reason", sa.Text(), nullable=True))
    op.add_column("jobs", sa.Column("pieces", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop them."""
    op.drop_column("jobs", "pieces")
    op.drop_column("jobs", "finish_reason")
