"""A JSONL run from file to results: submit time and memory, time to completed, export time.

    python -m bench.bulk_run [--lines 10000] [--out bench/results/bulk-run.json]

The worker runs in this process with the zero-cost engine (this measures dragoman, not a
model); the orchestrator is a real ``dragoman rq-worker`` process. Submission memory is the
tracemalloc peak of ``Client.submit_run``: it should not grow with the number of lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from bench.servers import benchmark_servers
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile
from worker.runtime import run_event_loop
from worker.service import Worker

WORDS = "the train station ticket machine journey morning evening city river old town office meeting".split()


def write_run_file(path: Path, lines: int) -> None:
    """``lines`` JSONL lines of 5-40 words, fixed seed."""
    rng = random.Random(7)
    with open(path, "w") as out:
        for i in range(lines):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))).capitalize() + "."
            out.write(json.dumps({"custom_id": f"line-{i}", "text": text}) + "\n")


def _start_orchestrator(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "rq-worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _traced_submit_peak(settings: Settings, path: Path) -> int:
    """Peak bytes allocated while submitting the file (to a key prefix no worker reads)."""
    with Client(settings.model_copy(update={"key_prefix": f"{settings.key_prefix}-traced"})) as client:
        tracemalloc.start()
        client.submit_run(path, source_lang="en", target_lang="fr")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def _export(client: Client, run_id: str, path: Path) -> int:
    with open(path, "w") as out:
        return sum(out.write(json.dumps(line) + "\n") > 0 for line in client.iter_run_results(run_id))


async def measure(lines: int) -> dict[str, Any]:
    """Run the benchmark once against fresh (or configured) servers."""
    with benchmark_servers() as urls, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            redis_url=urls.redis_url,
            database_url=urls.database_url,
            metrics_enabled=False,
            key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
        )
        path = Path(tmp) / "run.jsonl"
        write_run_file(path, lines)
        env = {
            **os.environ,
            "DRAGOMAN_REDIS_URL": urls.redis_url,
            "DRAGOMAN_DATABASE_URL": urls.database_url,
            "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        }
        orchestrator = await asyncio.to_thread(_start_orchestrator, env)
        engine = DeterministicEngine()
        worker = Worker(
            settings,
            redis_url=urls.redis_url,
            database_url=urls.database_url,
            engine=engine,
            profile=IdentityProfile(engine.tokenizer),
            max_in_flight=512,
        )
        try:
            with Client(settings) as client:
                # 1. Submit alone (no worker competing for this process): the rate, then, traced (which
                #    slows Python down) into a queue nobody reads, the peak memory.
                started = time.perf_counter()
                run_id = await asyncio.to_thread(client.submit_run, path, source_lang="en", target_lang="fr")
                submitted = time.perf_counter() - started
                peak = await asyncio.to_thread(_traced_submit_peak, settings, path)
                # 2. Worker and orchestrator until the run is completed.
                worker_started = time.perf_counter()
                await worker.start()
                while (await asyncio.to_thread(client.get_run, run_id)).status != "completed":
                    await asyncio.sleep(0.05)
                completed = time.perf_counter() - worker_started
                # 3. Results out, in input order.
                export_start = time.perf_counter()
                exported = await asyncio.to_thread(_export, client, run_id, Path(tmp) / "out.jsonl")
                export = time.perf_counter() - export_start
                status = client.get_run(run_id)
        finally:
            await worker.stop()
            orchestrator.send_signal(signal.SIGTERM)
            await asyncio.to_thread(orchestrator.wait, 60)
        assert exported == lines == status.counts.succeeded
        return {
            "lines": lines,
            "submit_seconds": round(submitted, 2),
            "submit_lines_per_second": round(lines / submitted),
            "submit_peak_memory_mb": round(peak / 1e6, 1),
            "worker_to_completed_seconds": round(completed, 2),
            "worker_lines_per_second": round(lines / completed),
            "export_seconds": round(export, 2),
        }


def main() -> None:
    """Parse arguments, run, print and save the result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000])
    parser.add_argument("--out", type=Path, default=Path("bench/results/bulk-run.json"))
    args = parser.parse_args()
    results = [run_event_loop(measure(n)) for n in args.lines]
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": "python -m bench.bulk_run " + " ".join(sys.argv[1:]),
        "results": results,
    }
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
