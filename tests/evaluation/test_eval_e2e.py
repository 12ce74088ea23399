"""``dragoman eval`` on the real CPU engine and the default model: a small catalogue, scored end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.main import main
from contract.settings import Settings
from producer.client import Client

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SMALL_ENGINE = ("--engines", "1", "--max-num-seqs", "4", "--max-model-len", "512", "--kv-cache-memory-bytes", "256M")

CATALOGUE = r"""msgid ""
msgstr ""
"Language: fr\n"
"Content-Type: text/plain; charset=UTF-8\n"

msgid "Good morning."
msgstr "Bonjour."

msgid "The file was not found."
msgstr "Le fichier est introuvable."

msgid "Do you want to continue?"
msgstr "Voulez-vous continuer ?"

#, fuzzy
msgid "Skipped: a fuzzy entry."
msgstr "Ignoré."

msgid "Thank you very much."
msgstr "Merci beaucoup."
"""


def test_eval_scores_the_default_model_on_the_cpu_engine(
    settings_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = tmp_path / "fr.po"
    catalogue.write_text(CATALOGUE, encoding="utf-8")
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", *SMALL_ENGINE],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "DRAGOMAN_METRICS_PORT": "0"},
        )
    try:
        with Client(settings_env) as client:
            deadline = time.monotonic() + 600  # a loaded shared machine: the engine took 10 min to start here
            while not client.run(client.core.models.is_live(settings_env.default_model)):
                assert worker.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker did not start"
                time.sleep(1)
        report_file = tmp_path / "report.json"
        assert main(["eval", str(catalogue), "--from", "en", "--json-out", str(report_file), "--timeout", "300"]) == 0
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    text = capsys.readouterr().out
    assert "dragoman eval: 4 segments" in text and "en->fr" in text
    assert "chrF++: nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:" in text
    report = json.loads(report_file.read_text(encoding="utf-8"))
    pair = report["systems"][0]["pairs"][0]
    assert pair["segments"] == 4 and pair["target_lang"] == "fr"
    outputs = [result["outputs"][settings_env.default_model] for result in report["results"]]
    succeeded = [output for output in outputs if output["status"] == "succeeded"]
    assert succeeded, [output["error"] for output in outputs]
    assert all(output["translation"] and not output["translation"].startswith("[echo]") for output in succeeded)
    assert all(output["error"] for output in outputs if output["status"] != "succeeded")  # failures say why
    assert pair["failed"] == 4 - len(succeeded)
    assert 0 < pair["scores"]["chrF++"]["score"] <= 100  # a tiny base model: low, but a real translation scores
