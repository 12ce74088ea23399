"""The served model a document's segments go to (several models in one deployment, issue 32).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25

A document is split by the orchestrator after the request that sent it has returned, so the
model it named (or none: the deployment's routes choose per segment) is kept on its row until
then. A nullable column with no default: adding it rewrites nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``documents.model``."""
    op.add_column("documents", sa.Column("model", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop ``documents.model``."""
    op.drop_column("documents", "model")
