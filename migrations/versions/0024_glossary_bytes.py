"""The bytes of each stored glossary's terms, which a tenant's glossary quota adds up.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04

``glossaries.entry_bytes``: the UTF-8 bytes of a glossary's source and target terms, written when it
is created. ``DRAGOMAN_GLOSSARY_QUOTA_BYTES`` bounds their sum over a tenant's glossaries (and
``DRAGOMAN_GLOSSARY_QUOTA_COUNT`` their number); summing a column of the tenant's rows, found by the
``(tenant, created_at, id)`` index, costs nothing like reading every glossary's entries.

Rows stored before are counted here, from their entries: one pass over the table, which holds at
most a few thousand rows per tenant.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``glossaries.entry_bytes`` and count the stored glossaries' terms into it."""
    op.add_column("glossaries", sa.Column("entry_bytes", sa.BigInteger(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE glossaries SET entry_bytes = (SELECT COALESCE(sum(octet_length(e ->> 0) + octet_length(e ->> 1)), 0) "
        "FROM jsonb_array_elements(entries) AS e)"
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_column("glossaries", "entry_bytes")
