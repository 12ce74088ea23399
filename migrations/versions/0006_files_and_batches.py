"""Files and batches of the OpenAI-compatible Batch API.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

A file is a ``files`` row and its bytes in ``file_chunks`` (at most 1 MiB a row, read and
written one chunk at a time). A batch is a ``batches`` row over a run (``runs.id`` =
``batches.run_id``): its jobs are the run's jobs, so they are ``jobs`` rows like any other.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``files``, ``file_chunks`` and ``batches`` (``jobs.finish_reason`` came with 0004)."""
    op.create_table(
        "files",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("complete", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    op.create_index("files_tenant_created", "files", ["tenant", "created_at", "id"])
    op.create_table(
        "file_chunks",
        sa.Column("file_id", sa.Text(), sa.ForeignKey("files.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("run_id", postgresql.UUID(as_uuid=True), nullable=False, unique=True),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("input_file_id", sa.Text(), nullable=False),
        sa.Column("completion_window", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("completed", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failed", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("output_file_id", sa.Text(), nullable=True),
        sa.Column("error_file_id", sa.Text(), nullable=True),
        sa.Column("errors", postgresql.JSONB(), nullable=True),
        sa.Column("metadata", postgresql.JSONB(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        # When a server last took up validating and enqueueing the batch (a stale one is resumed).
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("in_progress_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finalizing_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancelling_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("batches_tenant_created", "batches", ["tenant", "created_at", "id"])


def downgrade() -> None:
    """Drop ``batches``, ``file_chunks`` and ``files``."""
    op.drop_table("batches")
    op.drop_table("file_chunks")
    op.drop_table("files")
