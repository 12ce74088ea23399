"""``dragoman worker --engine echo`` as a user runs it: a separate process, no model, no vLLM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contract.schemas import JobStatus
from contract.settings import Settings
from producer.client import Client
from tests.child_env import child_env
from worker.deterministic_engine import ECHO_MARK, ChunkTokenizer

pytestmark = pytest.mark.timeout(120)

# Run the CLI with vLLM and torch made unimportable: the echo engine must not need them.
WITHOUT_VLLM = (
    "import sys; sys.modules.update(vllm=None, torch=None, transformers=None); "
    "from cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def _worker(settings: Settings, log: Path, *flags: str, **env: str) -> subprocess.Popen[bytes]:
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-c", WITHOUT_VLLM, "worker", *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(settings, **env),
        )


def _stop(worker: subprocess.Popen[bytes]) -> int:
    worker.send_signal(signal.SIGTERM)
    return worker.wait(timeout=60)


def test_echo_worker_runs_jobs_without_a_model(settings: Settings, client: Client, tmp_path: Path) -> None:
    texts = ["Where is the station?", "Grüße aus Köln, 東京 too."]
    ids = [client.submit(text, "en", "de") for text in texts]
    log = tmp_path / "worker.log"
    worker = _worker(settings, log, "--engine", "echo", "--echo-delay-ms", "300", DRAGOMAN_ECHO_DELAY_MS="0")
    try:
        jobs = [client.wait(job_id, timeout=60) for job_id in ids]
    finally:
        code = _stop(worker)
    output = log.read_text()
    assert code == 0, output[-3000:]
    tokens = ChunkTokenizer()
    for text, job in zip(texts, jobs, strict=True):
        assert job.status is JobStatus.SUCCEEDED, output[-3000:]
        assert job.translation == ECHO_MARK + text
        assert job.model == "default"  # the served model, the default model's name
        assert job.prompt_tokens == len(tokens.encode(text)) == -(-len(text.encode()) // 4)
        assert job.output_tokens == job.prompt_tokens + 2  # the mark's 7 bytes are 2 tokens
        assert job.run_seconds is not None and job.run_seconds >= 0.3  # the flag's delay, not the variable's
    assert "ENGINE ECHO: THIS WORKER DOES NOT TRANSLATE" in output
    assert "engine ready: echo, profile identity" in output
    assert "Traceback" not in output


def test_echo_engine_from_the_environment(settings: Settings, client: Client, tmp_path: Path) -> None:
    job_id = client.submit("Good night.", "en", "fr")
    log = tmp_path / "worker.log"
    worker = _worker(settings, log, DRAGOMAN_ENGINE="echo", DRAGOMAN_ECHO_DELAY_MS="200")
    try:
        job = client.wait(job_id, timeout=60)
    finally:
        code = _stop(worker)
    assert code == 0, log.read_text()[-3000:]
    assert job.translation == "[echo] Good night." and job.model == "default"
    assert job.run_seconds is not None and job.run_seconds >= 0.2


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--model", "/models/x"], "--model"),
        (["--engines", "auto"], "--engines auto"),
        (["--interactive-engine"], "--interactive-engine"),
        (["--profile", "chat"], "--profile"),
    ],
)
def test_echo_refuses_model_flags(settings: Settings, tmp_path: Path, flags: list[str], refused: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_VLLM, "worker", "--engine", "echo", *flags],
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"--engine echo runs no model, on no GPU: leave out {refused}" in done.stderr


@pytest.mark.parametrize(("flag", "value"), [("--echo-delay-ms", "5"), ("--echo-mode", "swapcase")])
def test_echo_flags_need_the_echo_engine(settings: Settings, flag: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_VLLM, "worker", "--engine", "vllm", flag, value],
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and f"{flag} is for --engine echo" in done.stderr


@pytest.mark.parametrize("from_flag", [True, False])
def test_swapcase_echo_shows_what_reached_the_model(
    settings: Settings, client: Client, tmp_path: Path, from_flag: bool
) -> None:
    texts = ["Where is the station?", "Click <x1>here</x1> to open <x2/>: Grüße, ß."]
    ids = [client.submit(text, "en", "de") for text in texts]
    log = tmp_path / "worker.log"
    flags = ("--engine", "echo", "--echo-mode", "swapcase") if from_flag else ()
    env = {"DRAGOMAN_ENGINE": "echo", "DRAGOMAN_ECHO_MODE": "mark" if from_flag else "swapcase"}
    worker = _worker(settings, log, *flags, **env)
    try:
        jobs = [client.wait(job_id, timeout=60) for job_id in ids]
    finally:
        code = _stop(worker)
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert [job.translation for job in jobs] == [
        "wHERE IS THE STATION?",
        "cLICK <x1>HERE</x1> TO OPEN <x2/>: gRÜSSE, SS.",
    ]
    assert "with its text with each letter's case swapped" in output
