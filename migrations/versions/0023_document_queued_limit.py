"""The limit of unfinished jobs a document's segments are reserved against when it is split.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02

``documents.max_queued_jobs``: the submitting API key's limit of its tenant's unfinished jobs
(``dragoman api-key create --max-queued-jobs``, else ``DRAGOMAN_API_MAX_QUEUED_JOBS``), kept with the
document because its number of jobs is known only once it is split: the orchestrator then reserves
every segment against it before queueing any, and a document that does not fit yet waits (``held``)
until it does. Null for a document with no tenant (the CLI, the Python client), which no limit applies
to, and for every document stored before this migration.

A nullable column with no default: adding it rewrites nothing, on any size of table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``documents.max_queued_jobs``."""
    op.add_column("documents", sa.Column("max_queued_jobs", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop it."""
    op.drop_column("documents", "max_queued_jobs")
