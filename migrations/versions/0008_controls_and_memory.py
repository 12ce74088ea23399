"""What the per-job controls leave on a job's row, and the translation memory.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

``jobs.detected_source_lang``: the language the worker found for ``source_lang = 'auto'``.
``jobs.glossary_misses``: the glossary's source terms in the text whose target term the
translation lacks (null: no glossary). ``jobs.from_memory``: served from the translation memory
instead of generated (a constant default: no table rewrite).

``translation_memory``: one translation per key, the SHA-256 of everything that decides the
output (model and its revision, profile and its version, languages, normalised text, glossary,
context, formality), so a changed model or prompt never finds an old entry. ``last_used_at``
orders the size-limit trim; ``created_at`` the age limit.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the three ``jobs`` columns and create ``translation_memory`` with its trim index."""
    op.add_column("jobs", sa.Column("detected_source_lang", sa.Text(), nullable=True))
    op.add_column("jobs", sa.Column("glossary_misses", postgresql.JSONB(), nullable=True))
    op.add_column("jobs", sa.Column("from_memory", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "translation_memory",
        sa.Column("key", sa.LargeBinary(), primary_key=True),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("profile", sa.Text(), nullable=False),
        sa.Column("source_lang", sa.Text(), nullable=False),
        sa.Column("target_lang", sa.Text(), nullable=False),
        sa.Column("source_text", sa.Text(), nullable=False),
        sa.Column("translation", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("hits", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("translation_memory_last_used", "translation_memory", ["last_used_at"])
    op.create_index("translation_memory_created", "translation_memory", ["created_at"])


def downgrade() -> None:
    """Drop ``translation_memory`` and the three ``jobs`` columns."""
    op.drop_table("translation_memory")
    op.drop_column("jobs", "from_memory")
    op.drop_column("jobs", "glossary_misses")
    op.drop_column("jobs", "detected_source_lang")
