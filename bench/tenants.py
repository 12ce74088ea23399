"""Fair share between tenants: a small tenant's run behind a big tenant's backlog, fair share on and off.

    python -m bench.tenants [--a-jobs 100000] [--b-jobs 100] [--out bench/results/issue33/tenants.json]

Issue 33: tenant A queues 100,000 bulk jobs, then tenant B a 100-job run. Measured in one run,
against one embedded Redis and PostgreSQL (or DRAGOMAN_REDIS_URL / DRAGOMAN_DATABASE_URL), for
each engine (the zero-cost one, and the deterministic one with a per-request delay standing in for
a model) and each mode (fair share on; off: one first-in first-out stream, as before issue 33),
the modes alternating so that both meet the same machine:

1. B's run on an idle system (a worker waiting, nothing else queued): from its submit to its last
   row's ``finished_at``;
2. A's 100,000 jobs queued (submit timed: the tenant submit path's rate), a worker started, and once
   it has written 2% of them, B's run submitted: B's completion time the same way, and the total
   throughput (every job of A and B, from the worker's start to the last row written).

The target: B behind the backlog <= 2 x B idle + one in-flight window (``max_in_flight`` jobs at
the measured throughput), and total throughput with fair share >= 0.95 x without.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
import uuid
from pathlib import Path
from typing import Any

from bench.enqueue import workload
from bench.servers import benchmark_servers
from contract.schemas import TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.async_client import AsyncClient
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile
from worker.runtime import run_event_loop
from worker.service import Worker

ENGINES = {"zero-cost": 0.0, "deterministic": 0.05}  # seconds each engine request takes


def _bulk(count: int, seed: int) -> list[TranslationRequest]:
    return [
        TranslationRequest(item.text, item.source_lang, item.target_lang, metadata=item.metadata, lane="bulk")
        for item in workload(count, seed)
    ]


def _worker(settings: Settings, urls: ServiceUrls, delay_s: float, max_in_flight: int) -> Worker:
    engine = DeterministicEngine(delay_s=delay_s)
    return Worker(
        settings,
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=IdentityProfile(engine.tokenizer),
        max_in_flight=max_in_flight,
    )


async def _until_rows(worker: Worker, rows: int) -> None:
    while worker.writer.stats.rows < rows:
        await asyncio.sleep(0.005)


async def _completion_s(producer: AsyncClient, ids: list[str], submitted_at: float) -> float:
    """Seconds from ``submitted_at`` to the last of ``ids`` finishing (their rows' ``finished_at``)."""
    finished = [(await producer.get(job_id)).finished_at for job_id in ids]
    assert all(f is not None for f in finished), "a job of B's run has no finished_at"
    return max(f.timestamp() for f in finished if f is not None) - submitted_at


async def _scenario(
    urls: ServiceUrls, *, fair: bool, delay_s: float, a_jobs: int, b_jobs: int, max_in_flight: int
) -> dict[str, Any]:
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
        fair_share=fair,
        memory_enabled=False,
    )
    b_items = _bulk(b_jobs, seed=2)
    async with AsyncClient(settings) as producer:
        # 1. B alone.
        worker = _worker(settings, urls, delay_s, max_in_flight)
        await worker.start()
        await asyncio.sleep(0.5)  # the worker is waiting on its lanes
        submitted_at = time.time()
        idle_ids = await producer.submit_many(b_items, tenant="b")
        await _until_rows(worker, b_jobs)
        await worker.stop()
        b_idle_s = await _completion_s(producer, idle_ids, submitted_at)

        # 2. A's backlog, then B.
        a_items = _bulk(a_jobs, seed=1)
        start = time.perf_counter()
        await producer.submit_many(a_items, tenant="a")
        a_submit_s = time.perf_counter() - start
        del a_items
        worker = _worker(settings, urls, delay_s, max_in_flight)
        start = time.perf_counter()
        await worker.start()
        await _until_rows(worker, a_jobs // 50)
        submitted_at = time.time()
        loaded_ids = await producer.submit_many(b_items, tenant="b")
        await _until_rows(worker, a_jobs + b_jobs)
        elapsed = time.perf_counter() - start
        await worker.stop()
        b_loaded_s = await _completion_s(producer, loaded_ids, submitted_at)
    throughput = (a_jobs + b_jobs) / elapsed
    window_s = max_in_flight / throughput
    return {
        "fair_share": fair,
        "engine_delay_s": delay_s,
        "a_jobs": a_jobs,
        "b_jobs": b_jobs,
        "max_in_flight": max_in_flight,
        "fair_share_buffer": settings.fair_share_buffer,
        "a_submit_jobs_per_s": round(a_jobs / a_submit_s),
        "b_idle_s": round(b_idle_s, 3),
        "b_behind_backlog_s": round(b_loaded_s, 3),
        "in_flight_window_s": round(window_s, 3),
        "b_target_s": round(2 * b_idle_s + window_s, 3),
        "b_within_target": b_loaded_s <= 2 * b_idle_s + window_s,
        "total_seconds": round(elapsed, 3),
        "total_jobs_per_s": round(throughput),
    }


def main() -> None:
    """Run both modes for each engine, alternating, print a table, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a-jobs", type=int, default=100_000)
    parser.add_argument("--b-jobs", type=int, default=100)
    parser.add_argument("--max-in-flight", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=1, help="times each (engine, mode) pair runs, alternating")
    parser.add_argument("--engines", default=",".join(ENGINES), help="which engines, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("bench/results/issue33/tenants.json"))
    args = parser.parse_args()

    runs: list[dict[str, Any]] = []
    with benchmark_servers() as urls:
        for name in args.engines.split(","):
            for _ in range(args.rounds):
                for fair in (False, True):
                    run = run_event_loop(
                        _scenario(
                            urls,
                            fair=fair,
                            delay_s=ENGINES[name],
                            a_jobs=args.a_jobs,
                            b_jobs=args.b_jobs,
                            max_in_flight=args.max_in_flight,
                        )
                    )
                    run["engine"] = name
                    runs.append(run)
                    print(
                        f"{name:13} fair={'on ' if fair else 'off'}  B idle {run['b_idle_s']:.3f}s  "
                        f"B behind A {run['b_behind_backlog_s']:.3f}s (target {run['b_target_s']:.3f}s)  "
                        f"total {run['total_jobs_per_s']:,} jobs/s  A submit {run['a_submit_jobs_per_s']:,} jobs/s",
                        flush=True,
                    )
    summary: dict[str, Any] = {}
    for name in args.engines.split(","):
        on = [r for r in runs if r["engine"] == name and r["fair_share"]]
        off = [r for r in runs if r["engine"] == name and not r["fair_share"]]
        summary[name] = {
            "throughput_fair_vs_fifo": round(
                sum(r["total_jobs_per_s"] for r in on) / sum(r["total_jobs_per_s"] for r in off), 3
            ),
            "submit_fair_vs_fifo": round(
                sum(r["a_submit_jobs_per_s"] for r in on) / sum(r["a_submit_jobs_per_s"] for r in off), 3
            ),
            "b_behind_backlog_fair_s": [r["b_behind_backlog_s"] for r in on],
            "b_behind_backlog_fifo_s": [r["b_behind_backlog_s"] for r in off],
            "b_within_target_fair": all(r["b_within_target"] for r in on),
        }
        print(f"{name}: {summary[name]}")
    result = {
        "runs": runs,
        "summary": summary,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "when": time.strftime("%Y-%m-%d %H:%M"),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
