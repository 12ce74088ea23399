"""The HTTP API guide's ``curl`` examples, run as they are written against a real ``dragoman api`` process.

The block after the ``tests/api/test_readme_curl.py`` marker is parsed out of docs/guides/http-api.md
and run by bash, so the documentation cannot drift from what the server answers (the docs harness,
tests/docs/, counts the block as run here).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contract.settings import Settings
from storage import ApiKeyStore
from tests.waiting import FOREVER, wait_for
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

ROOT = Path(__file__).resolve().parents[2]
README_API = "http://127.0.0.1:8000"


def readme_curl_block() -> str:
    """The fenced bash block right after the marker naming this test in docs/guides/http-api.md."""
    text = (ROOT / "docs" / "guides" / "http-api.md").read_text(encoding="utf-8")
    marker = r"<!-- test: elsewhere: tests/api/test_readme_curl.py[^>]*-->\n"
    match = re.search(marker + r"```bash\n(.*?)\n```", text, re.DOTALL)
    assert match, "docs/guides/http-api.md lost its curl examples block"
    return match.group(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def api_server(settings_env: Settings) -> Iterator[str]:
    """A real ``dragoman api`` process on a free port; its base URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "api", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "DRAGOMAN_API_MAX_WAIT_SECONDS": str(FOREVER)},  # the waited submits wait for the job
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy_or_ended() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=None).status_code == 200
        except httpx.TransportError:
            return process.poll() is not None

    try:
        wait_for(healthy_or_ended, "dragoman api answers /healthz (or ended)")
        assert process.poll() is None, f"dragoman api did not start:\n{process.communicate()[0]}"
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=FOREVER)[0]
        assert "Traceback" not in output, output


def _json_values(output: str) -> list[Any]:
    """Every JSON value printed one after another (curl prints no newline after a body)."""
    decoder = json.JSONDecoder()
    values, index = [], 0
    while True:
        while index < len(output) and output[index].isspace():
            index += 1
        if index == len(output):
            return values
        value, index = decoder.raw_decode(output, index)
        values.append(value)


@pytest.fixture
def rq_worker(settings_env: Settings, tmp_path: Path) -> Iterator[None]:
    """A real ``dragoman rq-worker`` process (the README's document example needs one)."""
    log = open(tmp_path / "rq-worker.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "rq-worker"], cwd=ROOT, env=os.environ.copy(), stdout=log, stderr=log
    )
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=FOREVER)
        log.close()


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("jq") is None, reason="needs curl and jq")
async def test_readme_curl_examples_run(
    api_server: str,
    rq_worker: None,
    settings: Settings,
    key_store: ApiKeyStore,
    start_worker: WorkerFactory,
    tmp_path: Path,
) -> None:
    block = readme_curl_block()
    assert README_API in block
    # The guide's server, waits for the job (not for 30 s: the server waits as long as it takes, see api_server)
    # and looks again every 0.05 s, not every second.
    assert "?wait=30" in block and "; do sleep 1; done" in block
    script = block.replace(README_API, api_server).replace("?wait=30", f"?wait={FOREVER:.0f}")
    script = script.replace("; do sleep 1; done", "; do sleep 0.05; done")
    _, key = await key_store.create(f"readme-{settings.key_prefix}")
    env = {**os.environ, "DRAGOMAN_API_KEY": key}
    workdir = tmp_path / "shell"
    workdir.mkdir()
    async with start_worker(DeterministicEngine(delay_s=0.3)):
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-euo",
            "pipefail",
            "-c",
            script,
            env=env,
            cwd=workdir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode() + (tmp_path / "rq-worker.log").read_text()
    bodies, _, events = out.decode().partition("retry: ")
    printed = _json_values(bodies)
    # The GET, the two waited submits, the best guess's check, the list, the models, the unknown model, the cancel,
    # the keyless GET and the run's two result lines.
    assert len(printed) == 11, printed
    looked_up, waited, controlled, guessed, listed, models, unknown, cancelled, keyless, first, second = printed
    assert guessed is True  # "Save" from auto with detection best_guess: succeeded, its language said
    assert looked_up["status"] in ("queued", "running", "succeeded") and looked_up["source_lang"] == "en"
    assert waited["status"] == "succeeded" and waited["translation"] == "Thank you."
    assert waited["metadata"] == {"doc": "a.txt"}
    # The test engine echoes the text, so "cat" has no "chat" in its translation.
    assert controlled["status"] == "succeeded", controlled["error"]
    assert controlled["source_lang"] == "auto"
    assert controlled["detected_source_lang"] == "en" and controlled["glossary_misses"] == ["cat"]
    assert len(listed["ids"]) == 2
    assert models == [{"id": "default", "default": True, "engines": 1}]
    assert unknown["error"]["code"] == "model_not_found" and "'gpt-4o'" in unknown["error"]["message"]
    assert waited["model"] == "default"  # the served name of the model that answered
    assert cancelled.get("id") == looked_up["id"] or cancelled["error"]["code"] == "job_not_cancellable"
    assert keyless["error"]["code"] == "missing_api_key"
    assert first == {"custom_id": "a", "status": "succeeded", "translation": "One.", "quality_flags": {}}
    assert second["custom_id"] == "b" and second["translation"] == "Two."
    assert (workdir / "hello.fr.md").read_text() == "# Hello\n\nGood morning, *world*.\n"
    # The events stream from its start: the run's two jobs, each with its stream entry id.
    data = [json.loads(line.removeprefix("data: ")) for line in events.splitlines() if line.startswith("data: ")]
    assert sorted(event["status"] for event in data) == ["succeeded", "succeeded"]
    assert len({event["group_id"] for event in data}) == 1
    assert events.count("event: job.finished") == 2 and events.count("\nid: ") == 2
