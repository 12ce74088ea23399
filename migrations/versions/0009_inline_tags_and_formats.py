"""Placeholder-tag outcomes on job rows, a report on documents, and the new document formats.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24

``jobs.inline_tags``: for a document segment sent with placeholder tags, whether the translation
kept them (``kept``), kept them when retried (``retried``) or was translated run by run between
them (``fallback``); null for any other job. ``documents.report``: per document, how many
segments kept their tags, which were retried or fell back, and which failed.
``documents.retranslate``: translate the entries a catalogue already has a translation for too
(gettext ``msgstr``, XLIFF ``target``); by default they are kept. The format check
admits the formats the segmenter now reads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

FORMATS = ("txt", "md", "html", "srt", "vtt", "po", "json", "xliff", "docx")


def upgrade() -> None:
    """Add ``jobs.inline_tags``, ``documents.report`` and ``documents.retranslate``; widen the format check."""
    op.add_column("jobs", sa.Column("inline_tags", sa.Text(), nullable=True))
    op.add_column("documents", sa.Column("report", postgresql.JSONB(), nullable=True))
    op.add_column("documents", sa.Column("retranslate", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.drop_constraint("documents_format_valid", "documents", type_="check")
    listed = ", ".join(f"'{name}'" for name in FORMATS)
    op.create_check_constraint("documents_format_valid", "documents", f"format IN ({listed})")


def downgrade() -> None:
    """Drop the report and the outcome column; the old format check (rows in new formats must go first)."""
    op.drop_constraint("documents_format_valid", "documents", type_="check")
    op.create_check_constraint("documents_format_valid", "documents", "format IN ('txt', 'md', 'html')")
    op.drop_column("documents", "retranslate")
    op.drop_column("documents", "report")
    op.drop_column("jobs", "inline_tags")
