"""The office and e-book formats, and documents whose source language is detected.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26

The format check admits ``.pptx``, ``.xlsx`` (Office Open XML, as ``.docx``), ``.odt``, ``.odp``,
``.ods`` (OpenDocument) and ``.epub``. ``documents.detected_source_lang``: for a document sent with
``source_lang = "auto"``, the language the orchestrator found in its text when it split it (its
segments are queued with that language); null for any other document, as ``jobs`` keeps it.
A nullable column with no default: adding it rewrites nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

PREVIOUS = ("txt", "md", "html", "srt", "vtt", "po", "json", "xliff", "docx")
FORMATS = (*PREVIOUS, "pptx", "xlsx", "odt", "odp", "ods", "epub")


def _format_check(formats: tuple[str, ...]) -> None:
    op.drop_constraint("documents_format_valid", "documents", type_="check")
    listed = ", ".join(f"'{name}'" for name in formats)
    op.create_check_constraint("documents_format_valid", "documents", f"format IN ({listed})")


def upgrade() -> None:
    """Widen the format check; add ``documents.detected_source_lang``."""
    _format_check(FORMATS)
    op.add_column("documents", sa.Column("detected_source_lang", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop the column; the old format check (rows in the new formats must go first)."""
    op.drop_column("documents", "detected_source_lang")
    _format_check(PREVIOUS)
