"""One side of ``bench.hostile_api``: a source tree's whole deployment, as processes, on servers of its own.

A side is a checkout (this working tree, or another commit checked out beside it by
:func:`checkout_of`) run as users run it: ``dragoman db upgrade``, ``dragoman api-key create``,
``dragoman worker --engine echo``, ``dragoman rq-worker`` and ``dragoman api``, each ``python -m
cli.main`` with the checkout first on the path (this tree's ``.venv``: the dependencies are the same),
against an embedded Redis and PostgreSQL of the side's own, so that one commit's schema and queues
never meet the other's. ``dragoman api`` is started afresh for each attack (:meth:`Side.api`): its
peak memory is then that attack's, and whatever an attack left behind in it (sockets, threads still
busy) is gone before the next one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.hostile_target import Key
from contract.services import ServiceUrls

REPOSITORY = Path(__file__).resolve().parents[1]
WEBHOOK_SECRET = "bench-hostile-api-webhook-secret"
UNLIMITED_RATE = 10**9
"""Requests per minute of the benchmark's own keys: no attack may be refused for its rate alone."""


class StackError(Exception):
    """A process of a side would not start or do its part (its log says why)."""


@contextmanager
def checkout_of(ref: str) -> Iterator[Path]:
    """``ref`` checked out (detached) in a temporary folder beside the working tree; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-ref-") as parent:
        folder = Path(parent) / "checkout"
        git = ["git", "-C", str(REPOSITORY)]
        subprocess.run([*git, "worktree", "add", "--detach", "--quiet", str(folder), ref], check=True)
        try:
            yield folder
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(folder)], check=False)
            subprocess.run([*git, "worktree", "prune"], check=False)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def memory_mib(pid: int, field_name: str) -> float | None:
    """``VmRSS`` (now) or ``VmHWM`` (the peak) of process ``pid`` in MiB; ``None`` once it is gone (Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@dataclass
class Api:
    """A running ``dragoman api``: its base URL, process and log."""

    base: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.base.rsplit(":", 1)[1])

    def peak_rss_mib(self) -> float | None:
        """The most memory it has held since it started (``None`` if it is gone)."""
        return memory_mib(self.process.pid, "VmHWM")

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def tracebacks(self) -> int:
        """Tracebacks its log holds so far."""
        return self.log.read_text(errors="replace").count("Traceback (most recent call last)")


@dataclass
class Side:
    """One checkout's deployment on ``urls``: the processes' environment, the worker and orchestrator, the keys."""

    label: str
    checkout: Path | None
    urls: ServiceUrls
    log_dir: Path
    settings_env: dict[str, str] = field(default_factory=dict)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.key_prefix = f"bench-hostile-{uuid.uuid4().hex[:8]}"

    @property
    def env(self) -> dict[str, str]:
        """The environment every process of this side runs with."""
        env = {
            **os.environ,
            "DRAGOMAN_REDIS_URL": self.urls.redis_url,
            "DRAGOMAN_DATABASE_URL": self.urls.database_url,
            "DRAGOMAN_KEY_PREFIX": self.key_prefix,
            "DRAGOMAN_MEMORY_ENABLED": "false",
            "DRAGOMAN_METRICS_ENABLED": "false",
            "DRAGOMAN_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.0/8"]',
            **self.settings_env,
        }
        if self.checkout is not None:
            env["PYTHONPATH"] = str(self.checkout)
        return env

    def _command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cli.main", *args]

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            self._command(*args), env=self.env, cwd=self.checkout, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise StackError(f"{self.label}: dragoman {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.log_dir / f"{name}.log", "ab") as log:
            return subprocess.Popen(
                self._command(*args), env=self.env, cwd=self.checkout, stdout=log, stderr=subprocess.STDOUT
            )

    def start(self) -> None:
        """Migrate the side's database, then start its echo worker and its orchestrator."""
        self._run("db", "upgrade")
        self.workers.append(self._start("worker", "worker", "--engine", "echo"))
        self.workers.append(self._start("rq-worker", "rq-worker"))

    def stop(self) -> None:
        """Stop the worker and the orchestrator (SIGTERM, then SIGKILL after 30 s)."""
        for process in self.workers:
            process.terminate()
        for process in self.workers:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.workers.clear()

    def key(self, name: str, *, max_queued_jobs: int = 10**8) -> Key:
        """A new API key of a new tenant named after ``name`` (``dragoman api-key create``), no rate limit."""
        tenant = f"{name}-{uuid.uuid4().hex[:6]}"
        out = self._run(
            "api-key", "create", tenant, "--tenant", tenant, "--rate-limit", str(UNLIMITED_RATE),
            "--max-queued-jobs", str(max_queued_jobs), "--json",
        )  # fmt: skip
        return Key(tenant, str(json.loads(out.strip().splitlines()[-1])["key"]))

    @contextmanager
    def api(self, name: str) -> Iterator[Api]:
        """A fresh ``dragoman api`` on a free port while the block runs, logging to ``<name>.api.log``."""
        port = free_port()
        log = self.log_dir / f"{name}.api.log"
        process = self._start(f"{name}.api", "api", "--port", str(port))
        api = Api(f"http://127.0.0.1:{port}", process, log)
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    with urllib.request.urlopen(f"{api.base}/readyz", timeout=5):
                        break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise StackError(f"{self.label}: dragoman api did not start; see {log}") from None
                    time.sleep(0.2)
            yield api
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
