"""Stored glossaries (the DeepL-compatible door) and the indexes a tenant's history is read by (the web console).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26

``glossaries``: a tenant's named term lists for one language pair, created once and used by id
(``glossary_id`` on ``POST /v2/translate``), as DeepL's ``/v2/glossaries`` keeps them. The entries are
one JSONB array of ``[source, target]`` pairs in the order they were given: a glossary is read whole,
at most a few thousand terms, never queried by term.

History: the console lists a tenant's newest runs, documents and stand-alone jobs a page at a time.
``runs`` and ``documents`` get a ``(tenant, created_at, id)`` index (small tables). ``jobs`` gets a
partial one over stand-alone jobs only (``run_id`` and ``document_id`` null): migration 0012 dropped
an index on every row for its write cost; the rows of runs and documents, the bulk of the table,
pay nothing for this one. Built in the migration's transaction: on a large ``jobs`` table, create it
first by hand with ``CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_standalone_tenant_created ON jobs
(tenant, created_at, id) WHERE run_id IS NULL AND document_id IS NULL`` and this step finds it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``glossaries`` and the history indexes."""
    op.create_table(
        "glossaries",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source_lang", sa.Text(), nullable=False),
        sa.Column("target_lang", sa.Text(), nullable=False),
        sa.Column("entries", postgresql.JSONB(), nullable=False),  # [[source, target], ...] in the given order
        sa.Column("entry_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    op.create_index("glossaries_tenant_created", "glossaries", ["tenant", "created_at", "id"])
    op.create_index("runs_tenant_created", "runs", ["tenant", "created_at", "id"], if_not_exists=True)
    op.create_index("documents_tenant_created", "documents", ["tenant", "created_at", "id"], if_not_exists=True)
    op.create_index(
        "jobs_standalone_tenant_created",
        "jobs",
        ["tenant", "created_at", "id"],
        postgresql_where=sa.text("run_id IS NULL AND document_id IS NULL"),
        if_not_exists=True,
    )


def downgrade() -> None:
    """Drop the history indexes and ``glossaries``."""
    op.drop_index("jobs_standalone_tenant_created", table_name="jobs", if_exists=True)
    op.drop_index("documents_tenant_created", table_name="documents", if_exists=True)
    op.drop_index("runs_tenant_created", table_name="runs", if_exists=True)
    op.drop_table("glossaries")
