"""The controls a job or document was submitted with, kept so that it can be retried as it was (the web console).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26

``jobs.controls``: the options a job's row does not otherwise keep (glossary, context, formality,
memory, lane and the model asked for), as one JSON object holding only those that were set; null
for a job submitted without any (nearly all of them: a document's segments and a run's lines carry
theirs in the document or run). ``POST /v1/jobs/{id}/retry`` submits the same text with them.

``documents.controls``: the glossary, context and formality a document was submitted with; the
orchestrator gives every segment job of the document those, and a retried document keeps them.

Both are nullable columns with no default: adding them rewrites nothing, on any size of table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``jobs.controls`` and ``documents.controls``."""
    op.add_column("jobs", sa.Column("controls", postgresql.JSONB(), nullable=True))
    op.add_column("documents", sa.Column("controls", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    """Drop both columns."""
    op.drop_column("documents", "controls")
    op.drop_column("jobs", "controls")
