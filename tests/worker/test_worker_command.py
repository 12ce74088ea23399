"""``dragoman worker`` as a user runs it: a separate process, real engine, SIGTERM to stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from cli.main import EXIT_OK
from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from contract.version import dragoman_version
from producer.client import Client
from tests.deploy.test_manifests import VLLM_METRICS_USED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def _status(port: int, path: str) -> int:
    """The status code of a GET, or 0 if nothing answers on the port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except urllib.error.URLError:
        return 0


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


def _settled_succeeded(port: int) -> list[float]:
    """``_succeeded`` once two reads a second apart agree (a job's state is visible just before it is counted)."""
    last = _succeeded(_get(port, "/metrics"))
    for _ in range(30):
        time.sleep(1)
        now = _succeeded(_get(port, "/metrics"))
        if now == last:
            return now
        last = now
    raise AssertionError(f"the succeeded count kept changing: {last}")


def test_kill_dash_nine_then_a_restarted_worker_process_loses_nothing_translates_and_exits_cleanly_on_sigterm(
    settings: Settings, client: Client, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    """``dragoman worker`` as a user runs it, twice: kill -9 of the first mid-work loses nothing, and the second,
    which takes over the dead one's jobs, serves the CLI, its ops port and a Markdown document, then stops on SIGTERM.

    One test for both: each start of the real engine costs a minute or more on a shared 2-core machine.
    """
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
        # Its own session, so the kill takes vLLM's engine processes down with it, as in a container.
        first = subprocess.Popen(
            _dragoman("worker", "--max-num-seqs", "4"),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        while sum(client.get(i).status is JobStatus.SUCCEEDED for i in ids) < 3:
            assert first.poll() is None, killed_log.read_text()[-3000:]
            time.sleep(0.2)
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
        _until(lambda: port_file.exists() or worker.poll() is not None, 600, "the worker's ops port")
        assert worker.poll() is None, log.read_text()[-3000:]
        port = int(port_file.read_text())
        restarted = [client.wait(i, timeout=600) for i in ids]
        taken_over = _settled_succeeded(port)  # the killed worker's jobs this one finished
        jobs = [
            client.wait(job_id, timeout=600)
            for job_id in [
                client.submit("Thank you very much.", "en", "fr"),
                client.submit("Where is the station?", "en", "de"),
            ]
        ]
        # The CLI sees the result too, exactly as a user would.
        done = subprocess.run(
            _dragoman("submit", "Good night.", "--from", "en", "--to", "es", "--wait"),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
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
                timeout=600,
            )
        finally:
            orchestrator.send_signal(signal.SIGTERM)
            orchestrator_code = orchestrator.wait(timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=120)
    assert [j.status for j in restarted] == [JobStatus.SUCCEEDED] * len(ids)  # nothing lost to the kill
    assert all(j.translation for j in restarted)
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
    assert len(taken_over) == 1 and taken_over[0] >= 1.0  # it ran what the killed one left
    assert _succeeded(metrics) == [taken_over[0] + 3.0]  # then the two jobs and the CLI's
    assert VLLM_METRICS_USED <= set(families)  # what the Grafana dashboard shows comes from this engine
    assert sum(s.value for s in families["vllm:generation_tokens"].samples if s.name.endswith("_total")) > 0
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
    assert set(raw_redis.scan_iter(match=client.keys.worker_pattern)) <= stale  # its heartbeat removed on exit


def test_a_missing_model_is_a_clear_error_before_the_engine_starts(settings: Settings, tmp_path: Path) -> None:
    assert settings.redis_url and settings.database_url
    env = {**os.environ, "DRAGOMAN_REDIS_URL": settings.redis_url, "DRAGOMAN_DATABASE_URL": settings.database_url}
    started = time.monotonic()
    result = subprocess.run(
        _dragoman("worker", "--model", str(tmp_path / "nowhere")), env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "does not exist" in result.stderr and "dragoman model prepare" in result.stderr
    assert time.monotonic() - started < 60  # no engine was started


def _live_workers(raw_redis: redis.Redis, client: Client) -> dict[str, dict[str, str]]:
    """Heartbeats of the live workers: consumer name -> its hash (pid, in_flight, ...)."""
    found: dict[str, dict[str, str]] = {}
    for key in raw_redis.scan_iter(match=client.keys.worker_pattern):
        beat: dict[str, str] = raw_redis.hgetall(key)  # type: ignore[assignment]
        if beat:
            found[str(key).rsplit(":", 1)[-1]] = beat
    return found


def _holders(raw_redis: redis.Redis, client: Client) -> list[str]:
    """Live workers holding jobs of the interactive lane right now (pending entries under their name)."""
    live = _live_workers(raw_redis, client)
    summary: Any = raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)
    return [str(c["name"]) for c in summary.get("consumers") or [] if int(c["pending"]) > 0 and str(c["name"]) in live]


def _until(condition: object, within: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_an_engine_group_runs_two_engines_and_restarts_a_killed_one_losing_nothing(
    settings: Settings, client: Client, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    """``--engines 2``: two worker processes under one command; kill -9 of one mid-job loses nothing."""
    assert settings.redis_url and settings.database_url
    port = free_port()
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
        "DRAGOMAN_METRICS_PORT": str(port),
    }
    log = tmp_path / "group.log"
    with open(log, "w") as out:
        group = subprocess.Popen(
            # Small engines: this 24 GB machine also runs the suite, and the replacement starts while the
            # supervisor is still killing the dead engine's vLLM processes.
            _dragoman(
                "worker",
                "--engines",
                "2",
                "--max-num-seqs",
                "4",
                "--max-model-len",
                "512",
                "--kv-cache-memory-bytes",
                "256M",
                "--dtype",
                "bfloat16",
                "--log-format",
                "json",
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        _until(lambda: len(_live_workers(raw_redis, client)) == 2, 600, "two engines")
        texts = [f"Sentence number {i} is about the weather in the mountains." for i in range(16)]
        ids = client.submit_many(TranslationRequest(text, "en", "fr") for text in texts)
        # Who holds jobs now, from the consumer group itself (a heartbeat's in_flight is up to 5 s old, and
        # short jobs on a quiet machine can start and finish between two beats).
        _until(lambda: bool(_holders(raw_redis, client)), 300, "work")
        victim_name = _holders(raw_redis, client)[0]
        os.kill(int(_live_workers(raw_redis, client)[victim_name]["pid"]), signal.SIGKILL)
        jobs = [client.wait(job_id, timeout=600) for job_id in ids]
        # The killed engine came back as a new process with a new consumer name.
        _until(
            lambda: len(_live_workers(raw_redis, client)) == 2 and victim_name not in _live_workers(raw_redis, client),
            600,
            "the restarted engine",
        )
        ports_answer = [json.loads(_get(port + i, "/healthz"))["alive"] for i in (1, 2)]
        # The group's own port: ready once every engine is, each engine's samples labelled with its name.
        _until(lambda: _status(port, "/readyz") == 200, 300, "the group ready")
        group_metrics = _get(port, "/metrics")
    finally:
        group.send_signal(signal.SIGTERM)
        code = group.wait(timeout=180)
    output = log.read_text()
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 16, output[-3000:]
    assert code == 0, output[-3000:]
    assert ports_answer == [True, True]  # each engine serves its own port, after the group's
    by_family = {f.name: f for f in text_string_to_metric_families(group_metrics)}
    assert {s.labels["engine"]: s.value for s in by_family["dragoman_engine_up"].samples} == {"e0": 1.0, "e1": 1.0}
    assert max(s.value for s in by_family["dragoman_engine_restarts"].samples) >= 1.0  # the killed one
    assert {s.labels["engine"] for s in by_family["dragoman_jobs"].samples} == {"e0", "e1"}
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any("restarting it in" in r["message"] for r in records)
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
    assert not _live_workers(raw_redis, client)  # every engine stopped and removed its heartbeat
