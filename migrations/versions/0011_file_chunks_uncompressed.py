"""File chunks stored without compression.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

PostgreSQL compresses a ``bytea`` value over 2 kB with pglz before it moves it out of line. For
a Batch API file that is the largest cost of an upload: 66 MB of JSONL took PostgreSQL 1.36 s of
CPU compressed and 0.40 s stored as it is (measured on the embedded server, which has no lz4),
and an output file pays it again while its batch runs. ``STORAGE EXTERNAL`` keeps the chunks out
of line uncompressed: JSONL takes about twice the disk it took, for a third of the CPU. Existing
chunks stay as they were stored (PostgreSQL reads both); only new ones are uncompressed.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Store ``file_chunks.data`` out of line without compression (new rows)."""
    op.execute("ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    """Compress new chunks again (PostgreSQL's default for ``bytea``)."""
    op.execute("ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTENDED")
