"""Create the runs and documents tables: groups of jobs submitted together and finished together.

A job row points at its run (``jobs.batch_id``) or document (``jobs.document_id``) with its
position (``jobs.sequence``). There is no foreign key on purpose: the worker writes job rows
from whatever producers put in the stream, and a bad group id must not fail a whole batch.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _common() -> list[sa.Column[object]]:
    return [
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("source_lang", sa.Text(), nullable=False),
        sa.Column("target_lang", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("callback_url", sa.Text(), nullable=True),
        sa.Column("webhook_status", sa.Text(), nullable=True),
        sa.Column("webhook_attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("metadata", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
    ]


def upgrade() -> None:
    """Create ``runs`` and ``documents``."""
    op.create_table(
        "runs",
        *_common(),
        sa.Column("submitted", sa.Integer(), nullable=False, server_default="0"),
        sa.CheckConstraint(
            "status IN ('submitting', 'running', 'completed', 'cancelled', 'failed')", name="runs_status_valid"
        ),
    )
    op.create_table(
        "documents",
        *_common(),
        sa.Column("format", sa.Text(), nullable=False),
        sa.Column("source_text", sa.Text(), nullable=False),
        sa.Column("max_segment_chars", sa.Integer(), nullable=False),
        sa.Column("skeleton", postgresql.JSONB(), nullable=True),
        sa.Column("output_text", sa.Text(), nullable=True),
        sa.Column("failed_segments", postgresql.JSONB(), nullable=True),
        sa.Column("assemblies", sa.Integer(), nullable=False, server_default="0"),
        sa.CheckConstraint("format IN ('txt', 'md', 'html')", name="documents_format_valid"),
        sa.CheckConstraint(
            "status IN ('splitting', 'running', 'completed', 'failed', 'cancelled')", name="documents_status_valid"
        ),
    )
    op.create_index("runs_status", "runs", ["status"])
    op.create_index("documents_status", "documents", ["status"])


def downgrade() -> None:
    """Drop ``runs`` and ``documents``."""
    op.drop_table("documents")
    op.drop_table("runs")
