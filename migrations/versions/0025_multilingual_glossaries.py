"""Multilingual glossaries: a glossary is one or more dictionaries, each a row of ``glossaries``.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05

DeepL's ``/v3/glossaries`` keeps several dictionaries (language pairs) under one glossary id, name and
creation time. Each dictionary is a row of ``glossaries`` as a v2 glossary was (its pair, entries, counts);
``glossaries.glossary_id`` names the glossary it belongs to. A row stored before is a glossary of one
dictionary: its ``glossary_id`` is its own ``id``, so every id a client holds still names its glossary.
One dictionary per pair in a glossary (the unique index), and the index finds a glossary's rows by id.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``glossaries.glossary_id`` (each stored row its own glossary) and its unique index with the pair."""
    op.add_column("glossaries", sa.Column("glossary_id", sa.Text(), nullable=True))
    op.execute("UPDATE glossaries SET glossary_id = id")
    op.alter_column("glossaries", "glossary_id", nullable=False)
    op.create_index(
        "glossaries_glossary_pair", "glossaries", ["glossary_id", "source_lang", "target_lang"], unique=True
    )


def downgrade() -> None:
    """Drop it; a multilingual glossary's dictionaries become glossaries of their own (their row ids)."""
    op.drop_index("glossaries_glossary_pair", table_name="glossaries")
    op.drop_column("glossaries", "glossary_id")
