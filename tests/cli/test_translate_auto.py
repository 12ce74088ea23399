"""``dragoman translate FILE --to LANG``: no ``--from`` needed, the language is detected from the document's text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cli.bulk import document_progress_text, format_progress
from contract.progress import GroupProgress, RunCounts
from contract.settings import Settings
from tests.orchestrator.test_runs_and_documents import rq_worker_process
from tests.worker.conftest import WorkerFactory, start_worker
from worker.deterministic_engine import DeterministicEngine

__all__ = ["rq_worker_process", "start_worker"]

pytestmark = pytest.mark.timeout(300)

NOTES = (
    "# Notes\n\n"
    "The orchestrator cuts every document into segments before any of them reaches a worker, "
    "and puts the document together again once the last one has finished.\n"
)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The command reads its settings from the environment."""


async def test_translate_without_from_detects_the_language(
    start_worker: WorkerFactory, rq_worker_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    source = tmp_path / "notes.md"
    source.write_text(NOTES)
    async with start_worker(DeterministicEngine()):
        args = ["translate", str(source), "--to", "fr", "--no-progress"]
        assert await asyncio.to_thread(main, args) == 0
    err = capsys.readouterr().err
    assert "source language detected: en" in err, err
    assert (tmp_path / "notes.fr.md").read_text() == NOTES


async def test_translate_of_an_undetectable_document_says_to_pass_from(
    rq_worker_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    source = tmp_path / "tiny.txt"
    source.write_text("OK\n")
    args = ["translate", str(source), "--to", "fr", "--no-progress"]
    assert await asyncio.to_thread(main, args) == 1
    err = capsys.readouterr().err
    assert "could not be split: source_lang was 'auto' but the document has too little text" in err, err
    assert "--from LANG" in err
    assert not (tmp_path / "tiny.fr.txt").exists()


def test_progress_shows_the_detected_language() -> None:
    progress = GroupProgress(
        id="d1",
        kind="document",
        status="running",
        counts=RunCounts(total=4, succeeded=1),
        jobs_per_second=None,
        seconds_left=None,
        created_at=0.0,
        completed_at=None,
        name="notes.md",
        detected_source_lang="de",
    )
    assert "detected   de" in format_progress(progress).splitlines()
    assert "from de (detected)" in document_progress_text(progress)[0]
    undetected = format_progress(
        GroupProgress(**{**progress.to_dict(), "counts": progress.counts, "detected_source_lang": None})
    )
    assert "detected" not in undetected
