"""Whose translation a memory entry is: the translation memory is per tenant (issue 33).

Revision ID: 0016
Revises: 0013
Create Date: 2026-11-25

A job of an API tenant is served only its own tenant's translations (unless the deployment sets
``DRAGOMAN_MEMORY_SCOPE=shared``): the tenant goes into the entry's key (the SHA-256 the worker
computes, ``worker/memory.py``) and into this column, which ``dragoman memory --tenant`` selects
by. Entries written before have no tenant (''), the memory of jobs without one, whose keys are
computed as before: they stay valid. A constant default: adding the column rewrites nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``translation_memory.tenant`` ('' for none) and its index."""
    op.add_column("translation_memory", sa.Column("tenant", sa.Text(), nullable=False, server_default=""))
    op.create_index("translation_memory_tenant", "translation_memory", ["tenant"])


def downgrade() -> None:
    """Drop the index and the column (tenants' entries stay: their keys include the tenant, so no other job matches)."""
    op.drop_index("translation_memory_tenant", table_name="translation_memory")
    op.drop_column("translation_memory", "tenant")
