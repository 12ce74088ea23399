"""What a stand-alone job was asked to do beyond its text and languages, as its row keeps it for a retry.

A job's row (``jobs``) keeps its text, languages, metadata and the model that answered, not the
controls it was submitted with: those travel only in the stream entry. ``POST /v1/jobs/{id}/retry``
submits the same job again, so the worker's writer stores them in ``jobs.controls`` (migration
0020) for stand-alone jobs that set any: glossary, context, formality, memory off, lane and source hints. A
run's line or a document's segment keeps none (its group is what is retried, from its own row).
"""

from __future__ import annotations

from typing import Any

from contract.controls import MAX_CONTEXT_CHARS, validate_context, validate_formality, validate_glossary
from contract.errors import InvalidJobError
from contract.schemas import JobSpec


def job_controls(spec: JobSpec) -> dict[str, Any] | None:
    """The controls ``spec`` sets, as ``jobs.controls`` keeps them; ``None`` for none, or for a run's or
    document's job (nearly every row: nothing stored)."""
    if spec.run_id is not None or spec.document_id is not None:
        return None
    if (
        not spec.glossary
        and spec.context is None
        and spec.formality is None
        and spec.memory
        and spec.lane is None
        and not spec.source_hints
    ):
        return None
    controls: dict[str, Any] = {}
    if spec.glossary:
        controls["glossary"] = dict(spec.glossary)
    if spec.context is not None:
        controls["context"] = spec.context
    if spec.formality is not None:
        controls["formality"] = spec.formality.value
    if not spec.memory:
        controls["memory"] = False
    if spec.lane is not None:
        controls["lane"] = spec.lane.value
    if spec.source_hints:
        controls["source_hints"] = list(spec.source_hints)
    return controls


def document_controls(glossary: object, context: object, formality: object) -> dict[str, Any] | None:
    """The controls a document gives each of its segment jobs, checked as a job's are, as ``documents.controls``
    keeps them; ``None`` for none. Raises :class:`~contract.errors.InvalidJobError` (or its glossary
    subclass) with the reason."""
    checked_glossary = validate_glossary(glossary)
    checked_context = validate_context(context)
    if checked_context is not None and "\x00" in checked_context:
        raise InvalidJobError("context contains a NUL character (\\x00), which cannot be stored; remove it")
    checked_formality = validate_formality(formality)
    controls: dict[str, Any] = {}
    if checked_glossary:
        controls["glossary"] = checked_glossary
    if checked_context is not None:
        controls["context"] = checked_context
    if checked_formality is not None:
        controls["formality"] = checked_formality.value
    return controls or None


def segment_context(document_context: str | None, preceding: str | None) -> str | None:
    """A segment job's context: the document's own, then the text before the segment, within
    :data:`~contract.controls.MAX_CONTEXT_CHARS` (the preceding text loses its start first)."""
    if not document_context:
        return preceding
    if not preceding:
        return document_context
    room = MAX_CONTEXT_CHARS - len(document_context) - 2
    if room <= 0:
        return document_context
    return f"{document_context}\n\n{preceding[-room:]}"
