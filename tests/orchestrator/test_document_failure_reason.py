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
    # The job limit lowered after the document was accepted with longer segments: its second one is over it.
    monkeypatch.setenv("DRAGOMAN_MAX_TEXT_CHARS", "100")
    words = " ".join(f"<b>w{i}</b>" for i in range(12))
    source = f"<p>Fine.</p>\n<p>Too long a sentence: {'word ' * 20}and {words} tags.</p>\n"
    document_id = client.submit_document(source, "html", "en", "fr", max_segment_chars=500)
    run_orchestrator()
    progress = client.get_document(document_id)
    assert progress.status == "failed"
    assert progress.error is not None
    assert progress.error.startswith("segment 1 ('Too long a sentence: word word"), progress.error
    assert "over the limit of 100" in progress.error
