"""The queued-job limit's admission: exact under concurrency, and what the atomic step costs.

    python -m bench.admission [--racers 25] [--size 5] [--limit 5] [--rounds 20] [--calls 2000]
                              [--out bench/results/issue33/admission.json]

Race: ``--racers`` concurrent submissions of ``--size`` jobs each against a limit of ``--limit``
(issue 33: 25 x 5 against 5 queued 120 jobs), each as ``POST /v1/jobs`` does it: admit, then
SUBMIT, on one client, ``--rounds`` times with a fresh tenant each; reports the jobs queued per
round, for the admission before issue 33 (count, then submit: the count is read again here the way
it was) and for RESERVE (count and reserve in one script). Cost: ``--calls`` sequential calls of
each step (the old count, RESERVE admitting 1 and 1,000 named jobs, a 1,000-id claim of a run's
reservation), median and p99 latency on this machine's Redis; and a 100,000-job run's claims end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.servers import benchmark_servers
from broker.queued_limit import QueuedJobLimit, TooManyQueuedJobsError
from contract.schemas import TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.async_client import AsyncClient
from producer.requests import Prepared, prepare
from worker.runtime import run_event_loop


def _jobs(settings: Settings, tenant: str, size: int) -> list[Prepared]:
    return [prepare(settings, TranslationRequest(f"Line {n}.", "en", "fr"), tenant=tenant) for n in range(size)]


async def _race(client: AsyncClient, limit: QueuedJobLimit, args: argparse.Namespace, atomic: bool) -> list[int]:
    """Jobs queued per round by ``--racers`` concurrent submissions."""
    queued: list[int] = []
    for _ in range(args.rounds):
        tenant = f"bench-{uuid.uuid4().hex[:8]}"

        async def submit(tenant: str = tenant) -> int:
            prepared = _jobs(client.settings, tenant, args.size)
            try:
                if atomic:
                    reservation = await limit.admit_jobs(tenant, args.limit, prepared)
                elif await limit.count(tenant) + args.size > args.limit:  # before issue 33: count, then submit
                    return 0
            except TooManyQueuedJobsError:
                return 0
            await client.submitter.write(prepared)
            if atomic:
                await reservation.release([])
            return len(prepared)

        queued.append(sum(await asyncio.gather(*(submit() for _ in range(args.racers)))))
    return queued


async def _latency(calls: int, step: Callable[[int], Awaitable[object]]) -> dict[str, float]:
    """Median and p99 milliseconds of ``calls`` sequential calls of ``step``."""
    times: list[float] = []
    for n in range(calls):
        began = time.perf_counter()
        await step(n)
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 3), "p99_ms": round(times[int(len(times) * 0.99)], 3)}


async def measure(args: argparse.Namespace, urls: ServiceUrls) -> dict[str, Any]:
    """Run the race both ways and time each step."""
    settings = Settings(redis_url=urls.redis_url, database_url=urls.database_url, key_prefix=f"bench-{os.getpid()}")
    client = AsyncClient(settings)
    limit = QueuedJobLimit(client.redis, client.keys, settings.state_ttl_seconds)
    try:
        before = await _race(client, limit, args, atomic=False)
        after = await _race(client, limit, args, atomic=True)
        tenant = f"cost-{uuid.uuid4().hex[:8]}"
        one = _jobs(settings, tenant, 1)
        thousand = _jobs(settings, tenant, 1_000)

        async def admit_one(_: int) -> None:
            await limit.admit_jobs(tenant, 10**9, one)  # the same id each time: counted once

        reservation = await limit.reserve(tenant, 10**9, args.calls * 1_000)

        async def claim(n: int) -> None:
            await reservation.claim([f"{n}-{i}" for i in range(1_000)])

        costs = {
            "count_then_submit_count": await _latency(args.calls, lambda _: limit.count(tenant)),
            "reserve_admit_1_named": await _latency(args.calls, admit_one),
            "reserve_admit_1000_named": await _latency(
                max(1, args.calls // 10), lambda _: limit.admit_jobs(tenant, 10**9, thousand)
            ),
            "reserve_claim_1000_ids": await _latency(max(1, args.calls // 10), claim),
        }
        await reservation.release()
        run = await limit.reserve(f"run-{uuid.uuid4().hex[:8]}", 10**9, 100_000)
        began = time.perf_counter()
        for chunk in range(100):
            await run.claim([f"{chunk}-{i}" for i in range(1_000)])
        run_claims_s = time.perf_counter() - began
        await run.release()
    finally:
        await client.close()
    return {
        "race": {
            "racers": args.racers,
            "size": args.size,
            "limit": args.limit,
            "rounds": args.rounds,
            "count_then_submit_queued_per_round": before,
            "reserve_queued_per_round": after,
        },
        "cost": costs,
        "run_100000_claims_seconds": round(run_claims_s, 3),
    }


def main() -> None:
    """Parse the arguments, run the measurement on the benchmark servers, write and print the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--racers", type=int, default=25)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=Path("bench/results/issue33/admission.json"))
    args = parser.parse_args()
    with benchmark_servers() as urls:
        report = run_event_loop(measure(args, urls))
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": "python -m bench.admission " + " ".join(sys.argv[1:]),
        **report,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
