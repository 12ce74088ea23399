"""``dragoman worker --engines 2`` as a user runs it: two worker processes under one command, kill -9 of one.

The engines are echo engines (``--engine echo``): the engine group's supervision, restart, ops port and
per-engine metrics are the same for vLLM engines, and an echo engine starts in about a second where a
real one takes a minute on a CPU. ``tests/worker/test_engine_group.py`` checks what each vLLM engine is
given (its memory share, its GPUs).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from producer.client import Client
from tests.child_env import child_env
from tests.waiting import FOREVER, wait_for

pytestmark = pytest.mark.timeout(300)


def _free_port() -> int:
    """A port nothing listens on right now (the group's, and the two after it for its engines)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 2 < 65536:
            return port


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


def test_an_engine_group_runs_two_engines_and_restarts_a_killed_one_losing_nothing(
    settings: Settings, client: Client, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    """``--engines 2``: two worker processes under one command; kill -9 of one mid-job loses nothing."""
    port = _free_port()
    env = child_env(
        settings,
        DRAGOMAN_METRICS_PORT=str(port),
        DRAGOMAN_VISIBILITY_TIMEOUT_SECONDS="5",
        DRAGOMAN_RECLAIM_INTERVAL_SECONDS="1",
    )
    log = tmp_path / "group.log"
    with open(log, "w") as out:
        group = subprocess.Popen(
            # --echo-delay-ms on the command line: a flag of the group's must reach each engine's process.
            [
                sys.executable,
                "-m",
                "cli.main",
                "worker",
                *("--engine=echo", "--engines=2", "--echo-delay-ms=300"),
                *("--max-in-flight=4", "--log-format=json"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_for(lambda: len(_live_workers(raw_redis, client)) == 2 or group.poll() is not None, "two engines")
        assert group.poll() is None, log.read_text()[-3000:]
        texts = [f"Sentence number {i} is about the weather in the mountains." for i in range(16)]
        ids = client.submit_many(TranslationRequest(text, "en", "fr") for text in texts)
        # Who holds jobs now, from the consumer group itself (a heartbeat's in_flight is up to 5 s old, and
        # short jobs can start and finish between two beats).
        victim_name = wait_for(lambda: _holders(raw_redis, client), "work")[0]
        os.kill(int(_live_workers(raw_redis, client)[victim_name]["pid"]), signal.SIGKILL)
        jobs = client.wait_many(ids, timeout=FOREVER)
        # The killed engine came back as a new process with a new consumer name.
        wait_for(
            lambda: len(live := _live_workers(raw_redis, client)) == 2 and victim_name not in live,
            "the restarted engine",
        )
        ports_answer = [json.loads(_get(port + i, "/healthz"))["alive"] for i in (1, 2)]
        # The group's own port: ready once every engine is, each engine's samples labelled with its name.
        wait_for(lambda: _status(port, "/readyz") == 200, "the group ready")
        group_metrics = _get(port, "/metrics")
    finally:
        group.send_signal(signal.SIGTERM)
        code = group.wait(timeout=FOREVER)
    output = log.read_text()
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 16, output[-3000:]
    assert all(j.translation == f"[echo] {text}" for j, text in zip(jobs, texts, strict=True))
    assert all(j.run_seconds is not None and j.run_seconds >= 0.3 for j in jobs)  # the group's flag reached both
    assert code == 0, output[-3000:]
    assert ports_answer == [True, True]  # each engine serves its own port, after the group's
    by_family = {f.name: f for f in text_string_to_metric_families(group_metrics)}
    assert {s.labels["engine"]: s.value for s in by_family["dragoman_engine_up"].samples} == {"e0": 1.0, "e1": 1.0}
    assert max(s.value for s in by_family["dragoman_engine_restarts"].samples) >= 1.0  # the killed one
    assert {s.labels["engine"] for s in by_family["dragoman_jobs"].samples} <= {"e0", "e1"}
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any("restarting it in" in r["message"] for r in records)
    assert any(r["message"] == "running 2 echo engines" for r in records)
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
    assert not _live_workers(raw_redis, client)  # every engine stopped and removed its heartbeat


def test_a_missing_model_is_a_clear_error_before_the_engine_starts(settings: Settings, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "worker", "--model", str(tmp_path / "nowhere")],
        env=child_env(settings),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "does not exist" in done.stderr and "dragoman model prepare" in done.stderr
    assert "starting engine" not in done.stderr  # refused before any engine starts
