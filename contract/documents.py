"""The document formats dragoman translates, and the orchestration task that splits them.

Producers store a document and queue :data:`SPLIT_TASK` by name; the orchestrator owns the
splitting itself, so a producer never imports it.
"""

from __future__ import annotations

FORMATS = ("txt", "md", "html", "srt", "vtt", "po", "json", "xliff")
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
