"""The document formats dragoman translates, and the orchestration task that splits them.

Producers store a document and queue :data:`SPLIT_TASK` by name; the orchestrator owns the
splitting itself, so a producer never imports it.
"""

from __future__ import annotations

FORMATS = ("txt", "md", "html")
SUFFIXES = {".txt": "txt", ".text": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}
SPLIT_TASK = "orchestrator.tasks.split_document"
