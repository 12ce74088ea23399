"""``dragoman worker`` as a user runs it: a separate process, real engine, SIGTERM to stop.

The one test here starts the real engine in a process of its own (the shared in-process engine serves the
other e2e tests). What kill -9, failovers and engine groups do to the queue does not depend on the model:
those run on the echo engine in the fast suite (``test_faults.py``, ``test_cluster_processes.py``,
``test_engine_group_command.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from cli.main import EXIT_OK
from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from contract.version import dragoman_version
from producer.client import Client
from tests.deploy.test_manifests import VLLM_METRICS_USED
from tests.waiting import FOREVER, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "getting-started.md"


def _assert_same_structure(source: str, translated: str) -> None:
    """Same lines, same Markdown syntax on each, code and URLs untouched; the prose changed."""
    assert translated != source
    pairs = list(zip(source.splitlines(), translated.splitlines(), strict=True))
    for before, after in pairs:
        for marker in ("# ", "## ", "- ", "| ", "```"):
            assert before.startswith(marker) == after.startswith(marker), (before, after)
        assert before.count("|") == after.count("|"), (before, after)
    assert 'echo "code is never translated"' in translated
    assert "](https://example.com/trains)" in translated and "`dragoman translate`" in translated
    assert "|-----|-------------|" in translated


def _dragoman(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", *args]


def _succeeded(metrics: str) -> list[float]:
    """The worker's ``dragoman_jobs`` count of succeeded jobs, from its /metrics text."""
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    return [s.value for s in families["dragoman_jobs"].samples if s.labels.get("status") == "succeeded"]


def _counted(port: int, jobs: int) -> list[float]:
    """``_succeeded`` once it counts ``jobs`` (a job's state is visible just before the worker counts it)."""
    return wait_for(
        lambda: (counted := _succeeded(_get(port, "/metrics"))) and counted[0] >= jobs and counted,
        f"{jobs} succeeded jobs in the worker's /metrics",
    )


def test_a_worker_process_takes_over_a_killed_ones_jobs_translates_and_exits_cleanly_on_sigterm(
    settings: Settings, client: Client, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    """``dragoman worker`` as a user runs it: a first worker (the echo engine, started in seconds) is killed with -9
    mid-work, and the real one, which takes over the dead one's jobs, serves the CLI, its ops port and a Markdown
    document, then stops on SIGTERM."""
    assert settings.redis_url and settings.database_url
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
        "DRAGOMAN_VISIBILITY_TIMEOUT_SECONDS": "5",
        "DRAGOMAN_RECLAIM_INTERVAL_SECONDS": "1",
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_METRICS_HOST": "127.0.0.1",
    }
    texts = [f"Sentence number {i} is about the weather in the mountains." for i in range(24)]
    ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
    killed_log = tmp_path / "killed.log"
    with open(killed_log, "w") as out:
        # Its own session, so the kill takes the whole process group down, as in a container.
        first = subprocess.Popen(
            _dragoman("worker", "--engine", "echo", "--echo-delay-ms", "200", "--max-in-flight", "4"),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: sum(client.get(i).status is JobStatus.SUCCEEDED for i in ids) >= 3 or first.poll() is not None,
            "the first worker's first jobs",
        )
        assert first.poll() is None, killed_log.read_text()[-3000:]
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    unfinished = [i for i in ids if not client.get(i).status.is_final]
    assert unfinished, "the kill came after the last job"
    stale = set(raw_redis.scan_iter(match=client.keys.worker_pattern))  # the killed one's heartbeat, until it expires

    # The port it bound, told in a file: a port picked free here can be taken by the time the engine is up.
    port_file = tmp_path / "ops.port"
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            _dragoman("worker", "--max-num-seqs", "8", "--log-format", "json"),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "DRAGOMAN_OPS_PORT_FILE": str(port_file)},
        )
    try:
        wait_for(lambda: port_file.exists() or worker.poll() is not None, "the worker's ops port")
        assert worker.poll() is None, log.read_text()[-3000:]
        port = int(port_file.read_text())
        restarted = client.wait_many(ids, timeout=FOREVER)
        taken_over = len(unfinished)  # the killed worker's jobs this one finished
        _counted(port, taken_over)
        jobs = client.wait_many(
            [client.submit("Thank you very much.", "en", "fr"), client.submit("Where is the station?", "en", "de")],
            timeout=FOREVER,
        )
        # The CLI sees the result too, exactly as a user would.
        done = subprocess.run(
            _dragoman("submit", "Good night.", "--from", "en", "--to", "es", "--wait"),
            env=env,
            capture_output=True,
            text=True,
        )
        metrics = _get(port, "/metrics")
        ready = _get(port, "/readyz")
        alive = json.loads(_get(port, "/healthz"))
        # A whole Markdown document, through the orchestrator, as the README shows it.
        with open(tmp_path / "rq-worker.log", "w") as rq_out:
            orchestrator = subprocess.Popen(_dragoman("rq-worker"), stdout=rq_out, stderr=subprocess.STDOUT, env=env)
        try:
            translated = subprocess.run(
                _dragoman(
                    "translate",
                    str(SAMPLE),
                    "--from",
                    "en",
                    "--to",
                    "fr",
                    "-o",
                    str(tmp_path / "out.md"),
                    "--no-progress",
                ),
                env=env,
                capture_output=True,
                text=True,
            )
        finally:
            orchestrator.send_signal(signal.SIGTERM)
            orchestrator_code = orchestrator.wait()
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait()
    assert [j.status for j in restarted] == [JobStatus.SUCCEEDED] * len(ids)  # nothing lost to the kill
    assert all(j.translation for j in restarted)
    assert all(not j.translation.startswith("[echo]") for j in restarted if j.id in unfinished)  # the real engine's
    assert translated.returncode == 0, translated.stderr + (tmp_path / "rq-worker.log").read_text()[-3000:]
    assert orchestrator_code == 0
    _assert_same_structure(SAMPLE.read_text(), (tmp_path / "out.md").read_text())
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED], output[-3000:]
    assert done.returncode == EXIT_OK and done.stdout.strip(), done.stderr
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(r["message"].startswith("engine ready: gemma-3-270m, profile few-shot") for r in records)
    assert records[0]["message"] == f"dragoman {dragoman_version()} worker starting"  # the version, first thing
    assert alive == {"alive": True, "version": dragoman_version()}
    assert not [r for r in records if r["level"] in ("ERROR", "CRITICAL")], output[-3000:]
    assert "Traceback" not in output
    assert ready == '{"ready": true, "checks": {"engine": "ok", "redis": "ok", "postgres": "ok"}}\n'
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    assert _succeeded(metrics) == [taken_over + 3.0]  # what the killed one left, then the two jobs and the CLI's
    assert VLLM_METRICS_USED <= set(families)  # what the Grafana dashboard shows comes from this engine
    assert sum(s.value for s in families["vllm:generation_tokens"].samples if s.name.endswith("_total")) > 0
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
    assert set(raw_redis.scan_iter(match=client.keys.worker_pattern)) <= stale  # its heartbeat removed on exit
