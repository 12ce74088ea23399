"""What a job's row keeps of its controls for a retry, and what a document gives its segments."""

from __future__ import annotations

import msgspec
import pytest

from contract.controls import MAX_CONTEXT_CHARS
from contract.errors import InvalidGlossaryError, InvalidJobError
from contract.job_controls import document_controls, job_controls, segment_context
from contract.schemas import JobSpec, build_job_spec


def _spec(**controls: object) -> JobSpec:
    return build_job_spec("j", "Hello.", "en", "fr", max_chars=100, **controls)  # type: ignore[arg-type]


def test_a_stand_alone_job_keeps_the_controls_it_set_and_only_those() -> None:
    assert job_controls(_spec()) is None
    spec = _spec(glossary={"a": "b"}, context="ctx", formality="informal", memory=False, lane="bulk")
    assert job_controls(spec) == {
        "glossary": {"a": "b"},
        "context": "ctx",
        "formality": "informal",
        "memory": False,
        "lane": "bulk",
    }
    assert job_controls(_spec(formality="default")) is None


def test_an_auto_jobs_source_hints_are_kept_for_its_retry() -> None:
    """A best-guess job retried from the console stays a best guess (a strict retry would fail the short text)."""
    spec = build_job_spec("j", "Save", "auto", "fr", max_chars=100, source_hints=["en"])
    assert job_controls(spec) == {"source_hints": ["en"]}


def test_a_runs_or_documents_job_keeps_none() -> None:
    spec = _spec(glossary={"a": "b"})
    assert job_controls(msgspec.structs.replace(spec, run_id="r")) is None
    assert job_controls(msgspec.structs.replace(spec, document_id="d")) is None


def test_document_controls_are_checked_as_a_jobs_are() -> None:
    assert document_controls(None, None, None) is None
    assert document_controls({" a ": "b"}, "ctx", "formal") == {
        "glossary": {"a": "b"},
        "context": "ctx",
        "formality": "formal",
    }
    with pytest.raises(InvalidGlossaryError):
        document_controls({"a": ""}, None, None)
    with pytest.raises(InvalidJobError, match="formality"):
        document_controls(None, None, "rude")
    with pytest.raises(InvalidJobError, match="NUL"):
        document_controls(None, "a\x00b", None)


def test_a_segments_context_is_the_documents_then_the_text_before_it_within_the_limit() -> None:
    assert segment_context(None, "before") == "before"
    assert segment_context("doc", None) == "doc"
    assert segment_context("doc", "before") == "doc\n\nbefore"
    long = segment_context("d" * (MAX_CONTEXT_CHARS - 5), "0123456789")
    assert long == "d" * (MAX_CONTEXT_CHARS - 5) + "\n\n789" and len(long) == MAX_CONTEXT_CHARS
    assert segment_context("d" * MAX_CONTEXT_CHARS, "before") == "d" * MAX_CONTEXT_CHARS
