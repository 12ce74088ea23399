"""``dragoman eval`` end to end on echo workers: jobs through Redis and live workers, scores, --compare, --json."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from contract.settings import Settings
from producer import AsyncClient
from producer.client import Client
from tests.child_env import child_env
from tests.waiting import FOREVER, wait_for

pytestmark = pytest.mark.timeout(300)

PAIRS = [
    {"source": "Good morning.", "reference": "[echo] Good morning."},  # the echo engine's exact output
    {"source": "The cat sleeps.", "reference": "Le chat dort."},
    {"source": "See you tomorrow.", "reference": "À demain."},
]


def _start(settings: Settings, log: Path, *names: str) -> subprocess.Popen[bytes]:
    flags = [arg for name in names for arg in ("--served-model-name", name)]
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", "--engine", "echo", *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(settings),
        )


@pytest.fixture
def workers(settings_env: Settings, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Started by the test (``_start``), stopped here."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for worker in started:
        worker.send_signal(signal.SIGTERM)
    for worker in started:
        worker.wait(timeout=FOREVER)


def _until_live(settings: Settings, *models: str) -> None:
    with Client(settings) as client:
        wait_for(
            lambda: all(client.run(client.core.models.is_live(model)) for model in models), f"live workers of {models}"
        )


def _pairs_file(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(pair) + "\n" for pair in PAIRS), encoding="utf-8")
    return path


def test_eval_scores_the_deployments_translations(
    settings_env: Settings, workers: list[subprocess.Popen[bytes]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workers.append(_start(settings_env, tmp_path / "worker.log"))
    _until_live(settings_env, settings_env.default_model)
    assert main(["eval", str(_pairs_file(tmp_path)), "--from", "en", "--to", "fr", "--worst", "2"]) == 0
    out = capsys.readouterr().out
    assert f"dragoman eval: 3 segments, model {settings_env.default_model}" in out
    assert "en->fr" in out and "chrF++: nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no" in out
    assert "BLEU: nrefs:1|case:mixed|eff:no|tok:13a" in out and "TER: nrefs:1|case:lc|tok:tercom" in out
    assert "worst 2 segments by sentence chrF++" in out
    assert "output:    [echo] See you tomorrow." in out  # the worst: nothing in common with "À demain."
    assert "reference: [echo] Good morning." not in out  # the best is not among the worst


def test_eval_compare_json_side_by_side(
    settings_env: Settings, workers: list[subprocess.Popen[bytes]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workers.append(_start(settings_env, tmp_path / "alpha.log", "alpha"))
    workers.append(_start(settings_env, tmp_path / "beta.log", "beta"))
    _until_live(settings_env, "alpha", "beta")
    pairs = str(_pairs_file(tmp_path))
    assert main(["eval", pairs, "--from", "en", "--to", "fr", "--compare", "alpha", "beta", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["models"] == ["alpha", "beta"] and report["segments"] == 3
    alpha, beta = report["systems"]
    assert alpha["pairs"][0]["scores"] == beta["pairs"][0]["scores"]  # the same engine, the same segments
    assert alpha["pairs"][0]["failed"] == 0 and alpha["pairs"][0]["segments"] == 3
    assert [r["source"] for r in report["results"]] == [pair["source"] for pair in PAIRS]
    first = report["results"][0]["outputs"]
    assert first["alpha"]["translation"] == first["beta"]["translation"] == "[echo] Good morning."
    assert first["alpha"]["chrf++"] == 100.0 and first["alpha"]["job_id"] != first["beta"]["job_id"]
    assert main(["eval", pairs, "--from", "en", "--to", "fr", "--compare", "alpha", "beta"]) == 0
    table = capsys.readouterr().out
    assert "alpha" in table and "beta" in table and "difference" in table


def test_eval_refuses_a_model_without_a_live_worker(
    settings_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[object] = []
    submit_many = AsyncClient.submit_many

    async def recorded(self: AsyncClient, *args: Any, **kwargs: Any) -> list[str]:
        submitted.append(args)
        return await submit_many(self, *args, **kwargs)

    monkeypatch.setattr(AsyncClient, "submit_many", recorded)
    pairs = str(_pairs_file(tmp_path))
    assert main(["eval", pairs, "--from", "en", "--to", "fr"]) == 1
    error = capsys.readouterr().err
    assert f"model {settings_env.default_model!r} has no live worker" in error and "dragoman worker" in error
    assert main(["eval", pairs, "--from", "en", "--to", "fr", "--model", "nobody"]) == 2
    assert "model 'nobody' is not served here" in capsys.readouterr().err
    assert submitted == []  # refused, not waited: nothing was submitted to wait for


def test_eval_bad_input_exits_2(settings_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "x"}\n', encoding="utf-8")
    assert main(["eval", str(bad), "--from", "en", "--to", "fr"]) == 2
    assert "bad.jsonl:1: 'source' and 'reference' must be strings" in capsys.readouterr().err
    assert main(["eval", str(bad), "--limit", "2", "--sample", "2"]) == 2
    assert "--limit and --sample" in capsys.readouterr().err
