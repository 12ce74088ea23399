"""``dragoman translate --glossary/--context/--formality``: the document keeps them and its segment jobs use them."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from contract.settings import Settings
from tests.orchestrator.test_runs_and_documents import rq_worker_process
from tests.worker.conftest import WorkerFactory, start_worker
from worker.deterministic_engine import DeterministicEngine

__all__ = ["rq_worker_process", "start_worker"]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The command reads its settings from the environment."""


async def test_translate_gives_every_segment_the_glossary_context_and_formality(
    start_worker: WorkerFactory, rq_worker_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], pg: Any
) -> None:
    from cli.main import main

    source = tmp_path / "notes.md"
    source.write_text("# A cat\n\nThe cat sleeps.\n")
    args = ["translate", str(source), "--from", "en", "--to", "fr", "--no-progress"]
    args += ["--glossary", '{"cat": "chat"}', "--context", "A children's book.", "--formality", "informal"]
    async with start_worker(DeterministicEngine()):
        assert await asyncio.to_thread(main, args) == 0
    found = re.search(r"document (\S+)", capsys.readouterr().err)
    assert found
    document_id = found.group(1)
    controls = pg.execute("SELECT controls FROM documents WHERE id = %s", (document_id,)).fetchone()[0]
    assert controls == {"glossary": {"cat": "chat"}, "context": "A children's book.", "formality": "informal"}
    misses = pg.execute(
        "SELECT glossary_misses FROM jobs WHERE document_id = %s ORDER BY sequence", (document_id,)
    ).fetchall()
    assert [row[0] for row in misses] == [["cat"], ["cat"]]  # the identity engine never uses "chat"


def test_a_bad_glossary_is_refused_before_anything_is_sent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import EXIT_BAD_INPUT, main

    source = tmp_path / "notes.md"
    source.write_text("Hello.\n")
    assert main(["translate", str(source), "--from", "en", "--to", "fr", "--glossary", "{nope"]) == EXIT_BAD_INPUT
    assert "--glossary must be a JSON object" in capsys.readouterr().err
