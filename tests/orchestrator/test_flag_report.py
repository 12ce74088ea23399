"""A document's report says which segments were flagged and why; its progress counts them."""

from __future__ import annotations

import asyncio

import pytest

from contract.settings import Settings
from orchestrator.segmenting.report import DocumentReport
from orchestrator.segmenting.skeleton import Segment
from producer.client import Client
from tests.flagged_rows import flagged_row, write_rows
from tests.orchestrator.test_runs_and_documents import run_orchestrator

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


def _finish_segments(settings: Settings, document_id: str, flags: list[dict[str, str] | None]) -> None:
    """The document's segments finished by the worker's upsert, each with its quality flags."""
    records = [flagged_row(document_id, n, flagged, document_id=document_id) for n, flagged in enumerate(flags)]
    asyncio.run(write_rows(settings.database_url, records))


def test_the_report_lists_flagged_segments_with_their_evidence(client: Client, settings: Settings) -> None:
    source = "Line 0.\nLine 1 costs 42 euros.\nLine 2.\n"
    document_id = client.submit_document(source, "txt", "en", "fr")
    run_orchestrator()  # split: three segments queued
    assert client.get_document(document_id).counts.total == 3
    numbers = {"numbers": "source number 42 missing"}
    _finish_segments(settings, document_id, [{}, numbers, None])
    run_orchestrator()  # every segment has a row: assembled
    progress = client.get_document(document_id)
    assert progress.status == "completed"
    assert (progress.counts.flagged, progress.counts.flags) == (1, {"numbers": 1})
    report = client.document_result(document_id).report
    assert report is not None
    assert report["flagged"] == [{"segment": 1, "flags": numbers, "source": "Line 1 costs 42 euros."}]
    assert report["flags"] == {"numbers": 1}


def test_clean_and_unchecked_segments_are_not_flagged() -> None:
    report = DocumentReport(2)
    segment = Segment(text="Hello.", raw="Hello.")
    report.add_flags(0, segment, {})
    report.add_flags(1, segment, None)
    report.add_flags(2, segment, {"tags": "tag <1> missing", "numbers": "3 missing"})
    assert report.to_dict()["flagged"] == [
        {"segment": 2, "flags": {"tags": "tag <1> missing", "numbers": "3 missing"}, "source": "Hello."}
    ]
    assert report.to_dict()["flags"] == {"tags": 1, "numbers": 1}
