"""API keys for the HTTP API, and the tenant that submitted each job.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``api_keys`` (only a key's SHA-256 is stored) and add ``jobs.tenant`` (null: not from the API)."""
    op.create_table(
        "api_keys",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.Text(), nullable=False, unique=True),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("rate_limit_per_minute", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("rate_limit_per_minute IS NULL OR rate_limit_per_minute > 0", name="api_keys_rate_positive"),
    )
    # A catalogue change only: a nullable column without a default rewrites no rows.
    op.add_column("jobs", sa.Column("tenant", sa.Text(), nullable=True))
    op.create_index(
        "jobs_tenant_created_at",
        "jobs",
        ["tenant", "created_at"],
        postgresql_where=sa.text("tenant IS NOT NULL"),
    )


def downgrade() -> None:
    """Drop ``jobs.tenant`` and ``api_keys``."""
    op.drop_index("jobs_tenant_created_at", table_name="jobs")
    op.drop_column("jobs", "tenant")
    op.drop_table("api_keys")
