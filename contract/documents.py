"""The document formats dragoman translates, and the orchestration task that splits them.

Producers store a document and queue :data:`SPLIT_TASK` by name; the orchestrator owns the
splitting itself, so a producer never imports it.
"""

from __future__ import annotations

import base64
import binascii

from contract.errors import InvalidJobError

FORMATS = ("txt", "md", "html", "srt", "vtt", "po", "json", "xliff", "docx")
BINARY_FORMATS = ("docx",)
"""Formats whose files are bytes: they travel and are stored as base64 text."""
SUFFIXES = {
    ".txt": "txt",
    ".text": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".srt": "srt",
    ".vtt": "vtt",
    ".po": "po",
    ".pot": "po",
    ".json": "json",
    ".xlf": "xliff",
    ".xliff": "xliff",
    ".docx": "docx",
}
SPLIT_TASK = "orchestrator.tasks.split_document"
FINISH_TASK = "orchestrator.tasks.finish_group"
SPLIT_TIMEOUT_SECONDS = 600
"""RQ's time limit for one split task (a document at ``DRAGOMAN_MAX_DOCUMENT_CHARS`` splits in seconds)."""

UNCAPPED_RETRIES = 1_000_000
"""RQ's ``Retry(max=...)`` for tasks that must not give up (split, finish): at one try every
:data:`RETRY_MAX_SECONDS` that is years, so a run or document never lands in the failed registry
for an outage, however long."""
RETRY_MAX_SECONDS = 300


def encode_document(fmt: str, data: bytes) -> str:
    """A file's bytes as the text dragoman stores: UTF-8 text, or base64 for a binary format."""
    if fmt in BINARY_FORMATS:
        return base64.b64encode(data).decode()
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise InvalidJobError(f"the document is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def decode_document(fmt: str, text: str) -> bytes:
    """The file's bytes from what dragoman stores (the inverse of :func:`encode_document`)."""
    if fmt in BINARY_FORMATS:
        try:
            return base64.b64decode(text, validate=True)
        except binascii.Error as exc:
            raise InvalidJobError(f"a stored {fmt} document is not base64 ({exc})") from None
    return text.encode()
