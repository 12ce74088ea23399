"""A document that fails on one segment says which one: its index and the start of its source."""

from __future__ import annotations

import pytest

from contract.settings import Settings
from producer.client import Client
from tests.orchestrator.test_runs_and_documents import run_orchestrator

pytestmark = pytest.mark.timeout(120)


def test_a_segment_the_job_refuses_fails_the_document_naming_it(
    settings_env: Settings, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Placeholder tags make a sentence's job text longer than its source's words: over the job limit.
    monkeypatch.setenv("DRAGOMAN_MAX_TEXT_CHARS", "100")
    words = " ".join(f"<b>w{i}</b>" for i in range(12))
    source = f"<p>Fine.</p>\n<p>Too many {words} tags.</p>\n"
    document_id = client.submit_document(source, "html", "en", "fr", max_segment_chars=100)
    run_orchestrator()
    progress = client.get_document(document_id)
    assert progress.status == "failed"
    assert progress.error is not None
    assert progress.error.startswith("segment 1 ('Too many <b>w0</b>"), progress.error
    assert "over the limit of 100" in progress.error
