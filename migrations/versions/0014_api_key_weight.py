"""Each API key's weight in the lanes' fair share between tenants (issue 33).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25

A tenant's jobs take turns with other tenants' in every lane; a key of weight N moves N times as
many entries per turn (``dragoman api-key create --weight N``). A constant default: adding the
column rewrites nothing on PostgreSQL 11 and later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``api_keys.weight`` (default 1, positive)."""
    op.add_column("api_keys", sa.Column("weight", sa.Integer(), nullable=False, server_default="1"))
    op.create_check_constraint("api_keys_weight_positive", "api_keys", "weight > 0")


def downgrade() -> None:
    """Drop ``api_keys.weight``."""
    op.drop_constraint("api_keys_weight_positive", "api_keys", type_="check")
    op.drop_column("api_keys", "weight")
