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
   its heartbeat reports 2% of them written (heartbeats come every 5 s: later, at this rate), B's
   run submitted: B's completion time the same way, and the total
   throughput (every job of A and B, from the first row's ``started_at`` to the last row's
   ``finished_at``).

The worker is ``dragoman worker --engine echo`` (``--echo-delay-ms`` for the deterministic engine)
in a process of its own, as deployed, so that the benchmark's own submits never wait on its loop.

The target: B behind the backlog <= 2 x B idle + one in-flight window (``max_in_flight`` jobs at
the measured throughput), and total throughput with fair share >= 0.95 x without.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench.enqueue import workload
from bench.servers import benchmark_servers
from broker.heartbeats import read_heartbeat
from contract.schemas import TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.async_client import AsyncClient
from storage import libpq_url

_WORKER = "bench-tenants-worker"  # the worker's consumer name: its heartbeat is read by key, never by a scan
ENGINES = {"zero-cost": 0.0, "deterministic": 50.0}  # milliseconds each engine request takes (--engine echo)


def _bulk(count: int, seed: int) -> list[TranslationRequest]:
    return [
        TranslationRequest(item.text, item.source_lang, item.target_lang, metadata=item.metadata, lane="bulk")
        for item in workload(count, seed)
    ]


def _start_worker(settings: Settings, delay_ms: float, max_in_flight: int) -> subprocess.Popen[bytes]:
    """``dragoman worker --engine echo`` in a process of its own, as deployed (the bench's loop stays free)."""
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url or "",
        "DRAGOMAN_DATABASE_URL": settings.database_url or "",
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_FAIR_SHARE": "true" if settings.fair_share else "false",
        "DRAGOMAN_MEMORY_ENABLED": "false",
        "DRAGOMAN_METRICS_ENABLED": "false",
        "DRAGOMAN_CONSUMER_NAME": _WORKER,
    }
    command = [sys.executable, "-m", "cli.main", "worker", "--engine", "echo", "--max-in-flight", str(max_in_flight)]
    if delay_ms:
        command += ["--echo-delay-ms", str(delay_ms)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_worker(worker: subprocess.Popen[bytes]) -> float:
    """Stop the worker; the CPU seconds it used (user + system: robust where the wall clock is shared)."""
    worker.send_signal(signal.SIGTERM)
    _, _, usage = os.wait4(worker.pid, 0)
    worker.returncode = 0
    return float(usage.ru_utime + usage.ru_stime)


async def _redis_cpu_s(producer: AsyncClient) -> float:
    """CPU seconds the Redis server has used so far (user + system, its main thread and the others)."""
    info = await producer.redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _until_alive(producer: AsyncClient) -> None:
    while not await read_heartbeat(producer.redis, producer.keys, _WORKER):
        await asyncio.sleep(0.05)


async def _until_written(producer: AsyncClient, rows: int) -> None:
    """Until the worker's heartbeat says it wrote ``rows`` rows (one ``HGETALL`` every 0.1 s). Neither a poll
    that counted the lane's lag (it scanned the FIFO mode's 100,000 unread entries) nor one that found the
    heartbeat by ``SCAN`` (every job's state key: ~130 calls of ~1 ms each per poll, half of Redis's time in
    a run, and more the longer a run took) may slow the run it measures."""
    while int((await read_heartbeat(producer.redis, producer.keys, _WORKER)).get("written", 0)) < rows:
        await asyncio.sleep(0.1)


def _rows(urls: ServiceUrls, tenant: str) -> tuple[int, float, float]:
    """A tenant's rows: how many, the first ``started_at`` and the last ``finished_at`` (Unix seconds)."""
    with psycopg.connect(libpq_url(urls.database_url)) as conn:
        row = conn.execute(
            "SELECT count(*), extract(epoch FROM min(started_at)), extract(epoch FROM max(finished_at)) "
            "FROM jobs WHERE tenant = %s",
            (tenant,),
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0), float(row[2] or 0)


async def _scenario(
    urls: ServiceUrls, *, fair: bool, delay_ms: float, a_jobs: int, b_jobs: int, max_in_flight: int
) -> dict[str, Any]:
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
        fair_share=fair,
        memory_enabled=False,
    )
    run = uuid.uuid4().hex[:8]
    a, b_idle, b = f"a-{run}", f"b-idle-{run}", f"b-{run}"
    b_items = _bulk(b_jobs, seed=2)
    async with AsyncClient(settings) as producer:
        # 1. B alone: a worker waiting, nothing else queued.
        worker = _start_worker(settings, delay_ms, max_in_flight)
        try:
            await _until_alive(producer)
            await asyncio.sleep(0.5)
            submitted_at = time.time()
            await producer.submit_many(b_items, tenant=b_idle)
            await _until_written(producer, b_jobs)
        finally:
            idle_worker_cpu_s = _stop_worker(worker)  # its start-up, mostly: subtracted below
        count, _, last = _rows(urls, b_idle)
        assert count == b_jobs, (count, b_jobs)
        b_idle_s = last - submitted_at

        # 2. A's backlog, then B once the worker has finished 2% of it.
        a_items = _bulk(a_jobs, seed=1)
        redis_before = await _redis_cpu_s(producer)
        start = time.perf_counter()
        await producer.submit_many(a_items, tenant=a)
        a_submit_s = time.perf_counter() - start
        redis_submit_cpu_s = await _redis_cpu_s(producer) - redis_before
        del a_items
        redis_before = await _redis_cpu_s(producer)
        worker = _start_worker(settings, delay_ms, max_in_flight)
        try:
            await _until_written(producer, a_jobs // 50)
            submitted_at = time.time()
            await producer.submit_many(b_items, tenant=b)
            await _until_written(producer, a_jobs + b_jobs)
        finally:
            worker_cpu_s = _stop_worker(worker) - idle_worker_cpu_s
        redis_run_cpu_s = await _redis_cpu_s(producer) - redis_before
    a_count, first, a_last = _rows(urls, a)
    b_count, _, b_last = _rows(urls, b)
    assert (a_count, b_count) == (a_jobs, b_jobs), (a_count, b_count)
    b_loaded_s = b_last - submitted_at
    elapsed = max(a_last, b_last) - first  # the worker's first start to the last row
    throughput = (a_jobs + b_jobs) / elapsed
    window_s = max_in_flight / throughput
    return {
        "fair_share": fair,
        "engine_delay_ms": delay_ms,
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
        # CPU per 1,000 jobs: what fair share costs, whatever else the machine was running.
        "redis_submit_cpu_ms_per_1000": round(redis_submit_cpu_s / a_jobs * 1e6, 1),
        "redis_run_cpu_ms_per_1000": round(redis_run_cpu_s / (a_jobs + b_jobs) * 1e6, 1),
        "worker_cpu_ms_per_1000": round(worker_cpu_s / (a_jobs + b_jobs) * 1e6, 1),
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
                    run = asyncio.run(
                        _scenario(
                            urls,
                            fair=fair,
                            delay_ms=ENGINES[name],
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
                        f"total {run['total_jobs_per_s']:,} jobs/s  A submit {run['a_submit_jobs_per_s']:,} jobs/s  "
                        f"CPU ms/1000 jobs: Redis submit {run['redis_submit_cpu_ms_per_1000']} "
                        f"run {run['redis_run_cpu_ms_per_1000']}, worker {run['worker_cpu_ms_per_1000']}",
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
            **{
                f"{cost}_fair_vs_fifo": round(sum(r[cost] for r in on) / sum(r[cost] for r in off), 3)
                for cost in ("redis_submit_cpu_ms_per_1000", "redis_run_cpu_ms_per_1000", "worker_cpu_ms_per_1000")
            },
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
