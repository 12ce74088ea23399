"""Who writes a batch's output file while its jobs finish, and the file being written.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24

``batches.follower``: the API server (a random token of its batch service) writing the batch's
output file as the finished prefix of its lines grows; ``batches.follow_until``: until when that
claim holds (renewed while it writes; a server that died lets it lapse, and the next read takes
the work over); ``batches.partial_output_file_id``: the output file being written, not yet
visible, which whoever takes the work over deletes. Nullable, no default: no rows rewritten.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``batches.follower``, ``batches.follow_until`` and ``batches.partial_output_file_id``."""
    op.add_column("batches", sa.Column("follower", sa.Text(), nullable=True))
    op.add_column("batches", sa.Column("follow_until", sa.DateTime(timezone=True), nullable=True))
    op.add_column("batches", sa.Column("partial_output_file_id", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop the three columns (a batch being followed is then finalized by its first read, as before)."""
    op.drop_column("batches", "partial_output_file_id")
    op.drop_column("batches", "follow_until")
    op.drop_column("batches", "follower")
