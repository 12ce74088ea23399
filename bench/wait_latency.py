"""How soon ``Client.wait`` answers once a job is done: woken by its completion event, or by polling.

    python -m bench.wait_latency [--jobs 40] [--delay-ms 300] [--out bench/out/wait-latency.json]

Against ``benchmark_servers()`` and one ``dragoman worker --engine echo --echo-delay-ms D``
subprocess (every job takes D ms in the engine, the translation memory off), one job at a time:
submit, then ``wait``. What ``wait`` adds beyond the engine's D ms is the latency measured, with
completion events (the default) and with them made unavailable in this process (the subscription
refused, so ``wait`` polls as it did before it listened: 0.05 s backing off to 0.5 s). The two
modes alternate job by job, so both see the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.servers import benchmark_servers
from broker.finish_notices import FinishNotices
from contract.settings import Settings
from producer import Client


async def _refuse(self: FinishNotices) -> None:
    raise OSError("completion events made unavailable by the benchmark")


def _start_worker(env: dict[str, str], delay_ms: int, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cli.main", "worker", "--engine", "echo", "--echo-delay-ms", str(delay_ms)]
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def measure(jobs: int, delay_ms: int, log: Path) -> dict[str, Any]:
    """Per mode: the latencies (ms) ``wait`` added beyond the engine's delay, and their p50/p95."""
    with benchmark_servers() as urls:
        env = {
            **os.environ,
            "DRAGOMAN_REDIS_URL": urls.redis_url,
            "DRAGOMAN_DATABASE_URL": urls.database_url,
            "DRAGOMAN_MEMORY_ENABLED": "false",
            "DRAGOMAN_METRICS_PORT": "0",
        }
        worker = _start_worker(env, delay_ms, log)
        added: dict[str, list[float]] = {"events": [], "polling": []}
        try:
            with Client(Settings(memory_enabled=False), redis_url=urls.redis_url, database_url=urls.database_url) as c:
                c.wait(c.submit("warm-up", "en", "fr"), timeout=120)  # the worker is up
                original = FinishNotices.connect
                for i in range(jobs):
                    for mode in ("events", "polling") if i % 2 == 0 else ("polling", "events"):
                        FinishNotices.connect = original if mode == "events" else _refuse  # type: ignore[method-assign]
                        c.run(c.core._finishes.close())  # the next wait subscribes (or fails to) anew
                        started = time.perf_counter()
                        job = c.wait(c.submit(f"sentence {i} {mode}", "en", "fr"), timeout=60)
                        elapsed_ms = (time.perf_counter() - started) * 1000
                        assert job.status.value == "succeeded", job
                        added[mode].append(elapsed_ms - delay_ms)
                FinishNotices.connect = original  # type: ignore[method-assign]
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    summary = {
        mode: {
            "p50_ms": round(statistics.median(values), 1),
            "p95_ms": round(statistics.quantiles(values, n=20)[-1], 1),
            "added_ms": [round(v, 1) for v in values],
        }
        for mode, values in added.items()
    }
    return {"jobs": jobs, "delay_ms": delay_ms, **summary}


def main() -> None:
    """Measure both modes and print and write the result."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=40, help="jobs per mode")
    parser.add_argument("--delay-ms", type=int, default=300, help="the echo engine's time per job")
    parser.add_argument("--out", type=Path, default=Path("bench/out/wait-latency.json"))
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = measure(args.jobs, args.delay_ms, args.out.with_suffix(".worker.log"))
    for mode in ("events", "polling"):
        print(f"{mode:8} wait adds p50 {result[mode]['p50_ms']:7.1f} ms, p95 {result[mode]['p95_ms']:7.1f} ms")
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
