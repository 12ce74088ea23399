"""What the engine and the two processes were doing during a feed, sampled twice a second.

A feed that is slower than another on the same engine is either not keeping the engine full
(few requests waiting in vLLM's scheduler) or taking CPU the engine needed (the front-end
process busy). This records both, side by side for every phase of ``bench.gpu``:
vLLM's running/waiting gauges (from its Prometheus collectors in this process), requests the
front end still holds, and the CPU share of this process and of its children (vLLM's engine
core) read from ``/proc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (vLLM's engine core among them)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def vllm_sums(wanted: dict[str, str], suffix: str = "") -> dict[str, float]:
    """vLLM's metric families named in ``wanted`` (family -> key), summed over all engines of this
    process from its Prometheus registry; with ``suffix``, only the samples whose name ends with it
    (``_total`` for counters)."""
    from prometheus_client import REGISTRY

    values = dict.fromkeys(wanted.values(), 0.0)
    for family in REGISTRY.collect():
        name = wanted.get(family.name)
        if name is not None:
            values[name] += sum(sample.value for sample in family.samples if sample.name.endswith(suffix))
    return values


def _vllm_gauges() -> dict[str, float]:
    """Sum of vLLM's scheduler gauges over all engines."""
    return vllm_sums(
        {
            "vllm:num_requests_running": "running",
            "vllm:num_requests_waiting": "waiting",
            "vllm:kv_cache_usage_perc": "kv_cache",
        }
    )


class EngineTrace:
    """Samples the engine and both processes every ``interval_s`` while a feed runs."""

    def __init__(self, frontend: Any, done: list[int], interval_s: float = 0.5) -> None:
        self._frontend = frontend  # vLLM's AsyncLLM
        self._done = done  # the feed keeps done[0] at the number of jobs finished
        self._interval_s = interval_s
        self.samples: list[dict[str, float]] = []

    async def _sample(self) -> None:
        pid = os.getpid()
        start = last_wall = time.perf_counter()
        last_own, last_kids = _cpu_seconds(pid), {c: _cpu_seconds(c) for c in _children(pid)}
        while True:
            await asyncio.sleep(self._interval_s)
            now = time.perf_counter()
            own, kids = _cpu_seconds(pid), {c: _cpu_seconds(c) for c in _children(pid)}
            wall = now - last_wall
            busiest_kid = max((kids[c] - last_kids.get(c, kids[c]) for c in kids), default=0.0)
            self.samples.append(
                {
                    "t": round(now - start, 2),
                    "done": self._done[0],
                    "frontend_unfinished": self._frontend.output_processor.get_num_unfinished_requests(),
                    **_vllm_gauges(),
                    "frontend_cpu": round((own - last_own) / wall, 3),
                    "engine_core_cpu": round(busiest_kid / wall, 3),
                }
            )
            last_wall, last_own, last_kids = now, own, kids

    def summary(self) -> dict[str, float]:
        """Means over the samples while work was left (the ramp-down tail excluded)."""
        busy = [s for s in self.samples if s["frontend_unfinished"] > 0] or self.samples
        keys = ("running", "waiting", "frontend_unfinished", "frontend_cpu", "engine_core_cpu", "kv_cache")
        return {f"mean_{k}": round(sum(s[k] for s in busy) / len(busy), 3) for k in keys} if busy else {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[EngineTrace]:
        """Sample while the body runs."""
        task = asyncio.create_task(self._sample(), name="engine-trace")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _py_spy_binary() -> str:
    """py-spy on PATH, beside this Python, or in the ``bin`` of a ``pip install --target`` folder."""
    found = shutil.which("py-spy")
    if found is not None:
        return found
    for folder in [Path(sys.executable).parent, *(Path(entry) / "bin" for entry in sys.path if entry)]:
        if (folder / "py-spy").is_file():
            return str(folder / "py-spy")
    return "py-spy"


def _start_py_spy(out: Path, name: str) -> subprocess.Popen[bytes] | None:
    """Start py-spy on this process and its children, its messages in ``out/name.log``; None if it cannot run."""
    out.mkdir(parents=True, exist_ok=True)
    command = [
        _py_spy_binary(),
        "record",
        "--pid",
        str(os.getpid()),
        "--subprocesses",
        "--rate",
        "100",
        "--format",
        "raw",
        "--output",
        str(out / f"{name}.txt"),
        "--nonblocking",
    ]
    with open(out / f"{name}.log", "w") as log:
        try:
            return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        except OSError as exc:
            print(f"py-spy not started: {exc}", flush=True)
            return None


@contextlib.asynccontextmanager
async def py_spy(out: Path | None, name: str) -> AsyncIterator[None]:
    """Record this process and its children with py-spy (raw collapsed stacks) while the body runs.

    Does nothing without ``out`` or when py-spy is missing or not allowed to attach.
    """
    process = None if out is None else await asyncio.to_thread(_start_py_spy, out, name)
    if process is None:
        yield
        return
    try:
        await asyncio.sleep(1.0)  # attach before the phase starts (the engine's loop keeps running)
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(process.wait, 60)
        except subprocess.TimeoutExpired:
            process.kill()
