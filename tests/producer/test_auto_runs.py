"""``dragoman run submit x.jsonl --from auto`` and ``Client.submit_run(source_lang="auto")``: each line's job
detects its own language (its ``detected_source_lang``), as a job sent with ``auto`` does.

Before, the run's ``auto`` was refused ("unknown language code 'auto'") though a line could say it itself.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from contract.ids import job_id_for
from contract.settings import Settings
from producer.client import Client
from tests.orchestrator.test_runs_and_documents import orchestrate_until
from tests.worker.conftest import WorkerFactory, start_worker
from worker.deterministic_engine import DeterministicEngine

__all__ = ["start_worker"]

pytestmark = pytest.mark.timeout(300)

LINES = {
    "es": "El gato duerme en el sofá desde esta mañana y nadie en la casa quiere despertarlo.",
    "de": "Die Katze schläft seit heute Morgen auf dem Sofa, und niemand im Haus will sie wecken.",
}


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The CLI and the RQ tasks read their settings from the environment."""


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "cats.jsonl"
    path.write_text("".join(json.dumps({"custom_id": lang, "text": text}) + "\n" for lang, text in LINES.items()))
    return path


async def test_a_run_from_auto_detects_each_lines_language(
    client: Client, run_file: Path, start_worker: WorkerFactory
) -> None:
    run_id = await asyncio.to_thread(client.submit_run, run_file, source_lang="auto", target_lang="fr")
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(lambda: client.get_run(run_id).status == "completed", "the run completed")
    jobs = [await asyncio.to_thread(client.get, job_id_for(run_id, n)) for n in range(len(LINES))]
    assert [(job.source_lang, job.detected_source_lang) for job in jobs] == [("auto", lang) for lang in LINES]


def test_run_submit_from_auto_is_accepted(run_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    assert main(["run", "submit", str(run_file), "--from", "auto", "--to", "fr"]) == 0, capsys.readouterr().err
    assert "unknown language code" not in capsys.readouterr().err
