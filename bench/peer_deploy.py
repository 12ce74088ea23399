"""One dragoman deployment for ``bench.peer``: the services, ``dragoman api``, ``dragoman worker`` processes,
and an OpenAI batch through the official ``openai`` SDK.

Every process is the command users run (``python -m cli.main api|worker``), started with the
benchmark's services and key prefix in its environment; a worker counts as ready when its
``/readyz`` (``DRAGOMAN_METRICS_PORT``, an engine group's answering for all of its engines) says 200,
so no engine start is ever inside a timed span.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.api import api_key, api_process, reset_state
from bench.engines import GROUP_LINE, WorkerProcess, say, stop_worker
from contract.services import ServiceUrls
from contract.settings import Settings

POLL_S = 0.25
"""How often the batch is retrieved while it runs: the end-to-end time is known to about this much."""
FINAL = ("completed", "failed", "expired", "cancelled")


def free_port() -> int:
    """A TCP port free on loopback now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class WorkerConfig:
    """How one ``dragoman worker`` is started: the engine, the model, and every flag given.

    ``flags`` are the user's (``--worker-args``, a memory share); ``load_format``/``ignore_eos``
    are what dummy weights need and nothing else.
    """

    engine: str = "vllm"
    model: Path | None = None
    load_format: str | None = None
    ignore_eos: bool = False
    served_model_name: str | None = None
    echo_delay_ms: int = 0
    flags: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        """The worker's command line."""
        argv = [sys.executable, "-m", "cli.main", "worker", "--log-level", "INFO"]
        if self.engine == "echo":
            argv += ["--engine", "echo", "--echo-delay-ms", str(self.echo_delay_ms)]
        else:
            if self.model is None:
                raise ValueError("a vLLM worker needs --model")
            argv += ["--model", str(self.model)]
            argv += ["--load-format", self.load_format] if self.load_format else []
            argv += ["--ignore-eos"] if self.ignore_eos else []
        argv += ["--served-model-name", self.served_model_name] if self.served_model_name else []
        return [*argv, *self.flags]


def split_flags(text: str) -> tuple[str, ...]:
    """``--worker-args "--max-num-seqs 256 --no-enforce-eager"`` as separate arguments."""
    return tuple(shlex.split(text))


@dataclass
class RunningWorker:
    """A started worker: its process, its ``/readyz`` port, and how long it took to be ready."""

    process: WorkerProcess
    config: WorkerConfig
    ops_port: int
    ready_s: float | None = None
    engines: int | None = None

    def describe(self) -> dict[str, Any]:
        """The worker for the report: its command line, start time, engines, and its start-up lines."""
        lines = self.process.log_text().splitlines()
        wanted = ("engines", "engine group", "max_num_seqs", "gpu_memory", "device default", "Enforce eager")
        return {
            "argv": shlex.join(self.config.argv()[2:]),
            "ready_s": self.ready_s,
            "engines": self.engines,
            "log": str(self.process.log_path),
            "start_lines": [line[-300:] for line in lines if any(w in line for w in wanted)][:12],
        }


def wait_ready(worker: RunningWorker, timeout: float) -> float:
    """Poll the worker's ``/readyz`` until 200; the seconds since it was started (raise if it exits or times out)."""
    url = f"http://127.0.0.1:{worker.ops_port}/readyz"
    deadline = time.perf_counter() + timeout
    while True:
        worker.process.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        if time.perf_counter() > deadline:
            raise TimeoutError(
                f"worker {worker.process.name} not ready after {timeout:.0f}s: {worker.process.log_path}"
            )
        time.sleep(0.5)
    worker.ready_s = round(time.perf_counter() - worker.process.started, 2)
    match = GROUP_LINE.search(worker.process.log_text())
    worker.engines = int(match.group(1)) if match else 1
    return worker.ready_s


@dataclass
class Deployment:
    """``dragoman api`` and its workers under one key prefix, on the benchmark's services."""

    urls: ServiceUrls
    settings: Settings
    base: str
    key: str
    logs: Path
    workers: list[RunningWorker] = field(default_factory=list)

    def env(self, ops_port: int) -> dict[str, str]:
        """A worker's environment: the services, the prefix, its ``/readyz`` port."""
        env = {
            **os.environ,
            "DRAGOMAN_REDIS_URL": self.urls.redis_url,
            "DRAGOMAN_DATABASE_URL": self.urls.database_url,
            "DRAGOMAN_KEY_PREFIX": self.settings.key_prefix,
            "DRAGOMAN_METRICS_PORT": str(ops_port),
            "DRAGOMAN_SHUTDOWN_GRACE_SECONDS": "10",
        }
        env.pop("DRAGOMAN_CONSUMER_NAME", None)
        return env

    def start_worker(self, name: str, config: WorkerConfig) -> RunningWorker:
        """Start one worker (not waiting for it)."""
        port = free_port()
        log_path = self.logs / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                config.argv(),
                env=self.env(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        say(f"started worker {name} (pid {process.pid}): {shlex.join(config.argv()[2:])}")
        worker = RunningWorker(WorkerProcess(name, process, log_path), config, port)
        self.workers.append(worker)
        return worker

    def ready_worker(self, name: str, config: WorkerConfig, timeout: float) -> RunningWorker:
        """Start one worker and wait until it is ready."""
        worker = self.start_worker(name, config)
        wait_ready(worker, timeout)
        say(f"worker {name} ready in {worker.ready_s} s ({worker.engines} engine(s))")
        return worker

    def stop_workers(self) -> None:
        """Stop every worker started so far."""
        while self.workers:
            stop_worker(self.workers.pop().process)

    def reset(self) -> None:
        """Forget every job of earlier measurements (untimed): the prefix's keys and the job rows."""
        reset_state(self.settings)


@contextmanager
def deployment(urls: ServiceUrls, logs: Path, name: str) -> Iterator[Deployment]:
    """``dragoman api`` on the services under a new key prefix, a tenant key; the workers started in the
    block are stopped with it."""
    settings = Settings(
        redis_url=urls.redis_url, database_url=urls.database_url, key_prefix=f"peer-{uuid.uuid4().hex[:8]}"
    )
    logs.mkdir(parents=True, exist_ok=True)
    key = api_key(settings, f"bench-{uuid.uuid4().hex[:8]}")
    with ExitStack() as stack:
        base = stack.enter_context(api_process(settings, logs / f"{name}-api.log"))
        deployed = Deployment(urls, settings, base, key, logs)
        stack.callback(deployed.stop_workers)
        yield deployed


def sdk_client(base: str, key: str) -> Any:
    """The official ``openai`` client on the deployment (imported here: only the dragoman sides need it)."""
    from openai import OpenAI

    return OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=2, timeout=600)


def sdk_batch(
    deployed: Deployment,
    path: Path,
    timeout: float,
    endpoint: str = "/v1/chat/completions",
    created: threading.Event | None = None,
) -> dict[str, Any]:
    """Upload ``path``, create the batch, retrieve it every :data:`POLL_S` until it ends, download its output.

    ``seconds``: from ``batches.create`` to the output downloaded (the upload is timed apart, in
    ``upload_s``); ``output``: the output file's text; ``created_at``: the wall clock at create.
    """
    client = sdk_client(deployed.base, deployed.key)
    started = time.perf_counter()
    with path.open("rb") as handle:
        uploaded = client.files.create(file=handle, purpose="batch")
    upload_s = time.perf_counter() - started
    created_at = time.time()
    start = time.perf_counter()
    batch = client.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")
    if created is not None:
        created.set()
    deadline = start + timeout
    while batch.status not in FINAL:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"batch {batch.id} still {batch.status} after {timeout:.0f}s: {batch.request_counts}")
        for worker in deployed.workers:
            worker.process.check_alive()
        time.sleep(POLL_S)
        batch = client.batches.retrieve(batch.id)
    jobs_done_s = time.perf_counter() - start
    if batch.status != "completed" or not batch.output_file_id:
        raise RuntimeError(f"batch {batch.id} ended {batch.status}: {batch.errors}")
    output = client.files.content(batch.output_file_id).read().decode()
    seconds = time.perf_counter() - start
    errors = client.files.content(batch.error_file_id).read().decode() if batch.error_file_id else ""
    return {
        "batch_id": batch.id,
        "upload_s": round(upload_s, 3),
        "completed_s": round(jobs_done_s, 3),
        "seconds": round(seconds, 3),
        "created_at": created_at,
        "request_counts": batch.request_counts.model_dump() if batch.request_counts else None,
        "output": output,
        "errors": errors,
    }


def worker_flags(worker_args: str, memory: float | None = None) -> tuple[str, ...]:
    """``--worker-args`` split, with ``--gpu-memory-utilization`` added when a share is given."""
    flags = split_flags(worker_args)
    return (*flags, "--gpu-memory-utilization", str(memory)) if memory is not None else flags


def describe_workers(workers: Sequence[RunningWorker]) -> list[dict[str, Any]]:
    """Each worker as the report shows it."""
    return [worker.describe() for worker in workers]
