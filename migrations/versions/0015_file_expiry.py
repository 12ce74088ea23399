"""Files expire, and a tenant's stored bytes can be summed quickly (issue 33).

Revision ID: 0015
Revises: 0017
Create Date: 2026-11-27

``files.expires_at`` (nullable: a file without one is kept until deleted) is OpenAI's
``expires_after`` on upload; a file past it answers 404 and the API's file sweeper deletes it and
its chunks. ``files_tenant_bytes`` lets the quota check sum one tenant's ``bytes`` from the index
alone; ``files_expires_at`` lets the sweeper find expired files without reading the table.
A nullable column with no default and two indexes: adding them rewrites nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``files.expires_at`` and the indexes the quota and the sweeper read."""
    op.add_column("files", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("files_tenant_bytes", "files", ["tenant"], postgresql_include=["bytes", "expires_at"])
    op.create_index("files_expires_at", "files", ["expires_at"], postgresql_where=sa.text("expires_at IS NOT NULL"))


def downgrade() -> None:
    """Drop them."""
    op.drop_index("files_expires_at", table_name="files")
    op.drop_index("files_tenant_bytes", table_name="files")
    op.drop_column("files", "expires_at")
