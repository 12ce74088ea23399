"""A Redis Cluster primary killed while jobs flow: what is lost, run twice or stuck, and how long the dip lasts.

    python -m bench.failover [--jobs 10000] [--rate 1000] [--wait-replicas 0,1] [--out bench/out/failover.json]

For each ``--wait-replicas`` value (``DRAGOMAN_SUBMIT_WAIT_REPLICAS``), on a fresh local Redis
Cluster (3 primaries, 1 replica each, ``cluster-node-timeout`` 1 s; ``storage.embedded_cluster``)
with ``redis_shards=3`` (a key prefix whose three shards sit on three different primaries) and an
embedded PostgreSQL:

1. a real worker runs in this process with the zero-cost engine, counting the engine's calls per job;
2. a producer submits ``--jobs`` jobs at ``--rate`` jobs/s, in chunks (``AsyncClient.submit_specs``
   with ids it chose, so it knows every id it sent); a chunk that fails (the node is gone, the
   cluster is reconfiguring, the replicas did not confirm) is sent again until it is acknowledged,
   the second time with ``only_new`` (jobs already queued are left alone: no second entry);
3. once half the jobs have a row, the primary of shard 0 is killed (SIGKILL: nothing flushed);
   its replica takes over; once it has, the killed node is started again and rejoins as the new
   primary's replica (what a restarted pod does; without it a shard with ``wait-replicas 1`` has
   no replica to confirm its writes and cannot take jobs);
4. it waits until every acknowledged job has a row and nothing more happens (no new row, no new
   engine call for ``--settle-s`` seconds, two visibility timeouts), or ``--deadline`` seconds.

Reported: **lost** (acknowledged to the producer, no row, and in no lane any more), **duplicated**
(jobs the engine ran more than once), **stuck** (acknowledged, no row, still in a lane, unread or
pending, at the end), rows of jobs never acknowledged (a failed chunk's jobs that were queued after
all), the time from the kill until the rows per second are back to 90% of the rate before it, and
how long shard 0 wrote no row. Each lost or duplicated job is listed with its shard and when it was
submitted and run relative to the kill, which is what explains it (see RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis as redis_client

from bench.enqueue import workload
from bench.servers import benchmark_servers
from bench.shards import spread_prefix
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from contract.errors import DragomanError
from contract.ids import new_job_id
from contract.schemas import JobSpec
from contract.settings import Settings
from producer.submitter import JobSubmitter
from storage import AsyncConnectionPool
from storage.embedded_cluster import EmbeddedCluster
from storage.jobs import JobStore
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.profiles import IdentityProfile
from worker.service import Worker

BUCKET_S = 0.25
"""The width of one bucket of the rows-per-second timeline."""


class FailoverBenchError(DragomanError):
    """The failover run could not do what it measures (the cluster did not fail over, say)."""


class CountingEngine(DeterministicEngine):
    """The zero-cost engine, counting its calls per job id (a request id is ``<job id>-<attempt>...``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, list[float]] = {}  # job id -> when (monotonic) each call came
        self.last_call = 0.0

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Note the call under its job's id, then echo."""
        self.last_call = time.monotonic()
        self.calls.setdefault(request.request_id[:36], []).append(self.last_call)
        return await super().generate(request)


def settings_for(
    redis_url: str, database_url: str, prefix: str, wait_replicas: int, visibility_s: float = 10.0
) -> Settings:
    """The deployment: 3 shards, submit WAIT as asked, a short visibility timeout (pending entries of a
    lost acknowledgement come back within seconds, not the default five minutes, yet well after a
    job's usual latency, so that a merely slow job is not taken over)."""
    return Settings(
        redis_url=redis_url,
        database_url=database_url,
        key_prefix=prefix,
        redis_shards=3,
        submit_wait_replicas=wait_replicas,
        submit_wait_timeout_ms=500,
        visibility_timeout_seconds=visibility_s,
        reclaim_interval_seconds=0.5,
        memory_enabled=False,
        quality_check_processes=0,
        metrics_port=0,
        read_block_ms=100,
    )


async def _produce(
    submitter: JobSubmitter, specs: Sequence[JobSpec], rate: float, chunk: int, log: dict[str, Any]
) -> None:
    """Submit ``specs`` at ``rate`` jobs/s; every chunk retried until acknowledged (``only_new`` after a failure)."""
    began = time.monotonic()
    for start in range(0, len(specs), chunk):
        batch = list(specs[start : start + chunk])
        delay = began + start / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tries = 0
        while True:
            sent = time.monotonic()
            try:
                await submitter.submit_specs(batch, only_new=tries > 0)
            except Exception as exc:  # the node is gone, the cluster is reconfiguring, WAIT fell short
                tries += 1
                if not log["errors"][type(exc).__name__]:
                    print(f"submit failed ({type(exc).__name__}: {exc}); sending the chunk again", flush=True)
                log["errors"][type(exc).__name__] += 1
                await asyncio.sleep(0.05)
                continue
            for spec in batch:
                log["acked"][spec.job_id] = (sent, time.monotonic())
            log["retried_chunks"] += tries > 0
            break


async def _lane_ids(redis: Any, keys: RedisKeys) -> dict[str, str]:
    """Job id -> ``"unread"`` or ``"pending"`` for every entry still in a lane of any shard."""
    found: dict[str, str] = {}
    for shard in keys.shards:
        for _, stream in shard.lanes:
            if not await redis.exists(stream):
                continue
            groups: Any = await redis.xinfo_groups(stream)
            last = next((g["last-delivered-id"] for g in groups if g["name"] == shard.consumer_group), "0-0")
            pending: Any = await redis.xpending_range(stream, shard.consumer_group, "-", "+", 1_000_000)
            pending_ids = {item["message_id"] for item in pending}
            entries: Any = await redis.xrange(stream, "-", "+")
            for entry_id, fields in entries:
                if entry_id in pending_ids:
                    found[fields.get("id", "")] = "pending"
                elif _after(entry_id, last):
                    found[fields.get("id", "")] = "unread"
    return found


def _after(entry_id: str, last: str) -> bool:
    a, _, b = entry_id.partition("-")
    c, _, d = last.partition("-")
    return (int(a), int(b)) > (int(c), int(d))


async def _rows(pool: AsyncConnectionPool, ids: Sequence[str]) -> dict[str, float]:
    """Job id -> its row's finished_at (unix seconds), for those of ``ids`` that have a row."""
    store = JobStore(pool)
    found: dict[str, float] = {}
    for start in range(0, len(ids), 2000):
        for job_id, job in (await store.get_many(ids[start : start + 2000])).items():
            found[job_id] = job.finished_at.timestamp() if job.finished_at else 0.0
    return found


@dataclass(frozen=True)
class Plan:
    """One run's sizes and clocks (see the command line)."""

    jobs: int = 10_000
    rate: float = 1_000.0
    chunk: int = 50
    deadline: float = 120.0
    visibility_s: float = 10.0
    settle_s: float = 20.0


async def run_once(cluster: EmbeddedCluster, database_url: str, plan: Plan, wait_replicas: int) -> dict[str, Any]:
    """One run: jobs flowing, shard 0's primary killed halfway, everything counted once it settles."""
    jobs, rate, chunk, deadline = plan.jobs, plan.rate, plan.chunk, plan.deadline
    prefix = spread_prefix(cluster, 3)
    settings = settings_for(cluster.url, database_url, prefix, wait_replicas, plan.visibility_s)
    keys = RedisKeys.from_settings(settings)
    engine = CountingEngine()
    worker = Worker(
        settings,
        redis_url=cluster.url,
        database_url=database_url,
        engine=engine,
        profile=IdentityProfile(engine.tokenizer),
        max_in_flight=256,
    )
    now = time.time()
    specs = [
        JobSpec(new_job_id(), item.text, "en", "fr", now, metadata={"n": n})
        for n, item in enumerate(workload(jobs, seed=wait_replicas + 1))
    ]
    shard_of = {spec.job_id: keys.shard_of(spec.job_id) for spec in specs}
    victim = cluster.primary_of(keys.for_shard(0).jobs_stream)
    log: dict[str, Any] = {"acked": {}, "errors": Counter(), "retried_chunks": 0}
    timeline: list[tuple[float, int]] = []
    await worker.start()
    redis = open_redis(cluster.url)
    pool = AsyncConnectionPool(database_url, max_connections=2)
    submitter = JobSubmitter(redis, keys, settings)  # the one path every front door submits through
    began = time.monotonic()
    producer = asyncio.create_task(_produce(submitter, specs, rate, chunk, log))
    killed_at: float | None = None
    replication_lag: int | None = None
    lags: list[int] = []  # shard 0's replica's lag in bytes, every tick before the kill
    promoted_at: float | None = None
    try:
        while True:
            await asyncio.sleep(0.05)
            moment = time.monotonic()
            rows = worker.writer.stats.rows
            timeline.append((moment - began, rows))
            if killed_at is None:
                lag = await asyncio.to_thread(_replication_lag, cluster, victim)
                if lag is not None:
                    lags.append(lag)
            if killed_at is None and rows >= jobs // 2:
                replication_lag = await asyncio.to_thread(_replication_lag, cluster, victim)
                await asyncio.to_thread(cluster.kill_node, victim)
                killed_at = time.monotonic()
            if killed_at is not None and promoted_at is None:
                if await asyncio.to_thread(_promoted, cluster, keys, victim):
                    promoted_at = time.monotonic()
                    await asyncio.to_thread(cluster.start_node, victim)
            quiet = moment - max(engine.last_call, killed_at or 0.0) > plan.settle_s
            if producer.done() and rows >= len(log["acked"]) and quiet and promoted_at is not None:
                break
            if moment - began > deadline:
                break
        if producer.done():
            producer.result()
        else:
            producer.cancel()
        settled = time.monotonic()
        await asyncio.to_thread(cluster.wait_healthy, 30.0)
        await worker.stop()
        ids = [spec.job_id for spec in specs]
        rows_at = await _rows(pool, ids)
        in_lanes = await _lane_ids(redis, keys)
    finally:
        if not producer.done():
            producer.cancel()
        await redis.aclose()
        await pool.close()
    if killed_at is None:
        raise FailoverBenchError(f"only {timeline[-1][1] if timeline else 0} of {jobs} rows: no primary was killed")
    acked = log["acked"]
    lost = [i for i in acked if i not in rows_at and i not in in_lanes]
    stuck = [i for i in acked if i not in rows_at and i in in_lanes]
    duplicated = {i: calls for i, calls in engine.calls.items() if len(calls) > 1}
    again_after_kill = [i for i, calls in duplicated.items() if calls[1] >= killed_at]
    kill_wall = time.time() - (time.monotonic() - killed_at)

    def described(job_id: str) -> dict[str, Any]:
        sent, confirmed = acked.get(job_id, (None, None))
        return {
            "job_id": job_id,
            "shard": shard_of.get(job_id),
            "submitted_ms_after_kill": None if sent is None else round((sent - killed_at) * 1000),
            "acked_ms_after_kill": None if confirmed is None else round((confirmed - killed_at) * 1000),
            "row_ms_after_kill": round((rows_at[job_id] - kill_wall) * 1000) if job_id in rows_at else None,
            "engine_calls_ms_after_kill": [round((t - killed_at) * 1000) for t in engine.calls.get(job_id, [])],
        }

    before = [rows for moment, rows in timeline if moment <= killed_at - began]
    base_rate = _rate(timeline, killed_at - began - 2.0, killed_at - began)
    recovered = _recovery(timeline, killed_at - began, base_rate)
    shard0_rows = sorted(rows_at[i] for i in rows_at if shard_of[i] == 0)
    gap = max((b - a for a, b in itertools.pairwise(shard0_rows)), default=0.0)
    return {
        "wait_replicas": wait_replicas,
        "jobs": jobs,
        "rate": rate,
        "acknowledged": len(acked),
        "rows": len(rows_at),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "duplicated_run_again_after_kill": len(again_after_kill),
        "stuck": len(stuck),
        "stuck_by_shard_and_place": dict(Counter(f"shard {shard_of[i]} {in_lanes[i]}" for i in stuck)),
        "rows_of_unacknowledged": len([i for i in rows_at if i not in acked]),
        "submit_errors": dict(log["errors"]),
        "retried_chunks": log["retried_chunks"],
        "killed_primary": victim,
        "rows_at_kill": before[-1] if before else 0,
        "replica_lag_bytes_at_kill": replication_lag,
        "replica_lag_bytes_before_kill": {
            "samples": len(lags),
            "nonzero": sum(1 for lag in lags if lag),
            "max": max(lags, default=0),
        },
        "failover_s": None if promoted_at is None else round(promoted_at - killed_at, 2),
        "rate_before_kill": round(base_rate),
        "recovered_after_s": recovered,
        "shard0_longest_gap_s": round(gap, 2),
        "settled_after_s": round(settled - began, 1),
        "lost_jobs": [described(i) for i in lost[:50]],
        "duplicated_jobs": [described(i) for i in list(duplicated)[:50]],
        "stuck_jobs": [described(i) | {"where": in_lanes[i]} for i in stuck[:50]],
    }


def _replication_lag(cluster: EmbeddedCluster, port: int) -> int | None:
    """Bytes of the primary's replication stream its replica had not received, just before the kill
    (what a failover can lose: asynchronous replication's window); None without a replica."""
    replicas = cluster.replicas_of(port)
    if not replicas:
        return None
    with redis_client.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=2) as node:
        written = int(node.info("replication")["master_repl_offset"])
    with redis_client.Redis(host="127.0.0.1", port=replicas[0], decode_responses=True, socket_timeout=2) as node:
        received = int(node.info("replication")["slave_repl_offset"])
    return max(0, written - received)


def _promoted(cluster: EmbeddedCluster, keys: RedisKeys, victim: int) -> bool:
    """Whether another node now serves the killed primary's slots (its replica took over)."""
    try:
        return cluster.primary_of(keys.for_shard(0).jobs_stream) != victim
    except DragomanError:
        return False


def _rate(timeline: Sequence[tuple[float, int]], start: float, end: float) -> float:
    """Rows per second between ``start`` and ``end`` (seconds from the beginning)."""
    inside = [(t, rows) for t, rows in timeline if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return 0.0
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _recovery(timeline: Sequence[tuple[float, int]], kill: float, base_rate: float) -> float | None:
    """Seconds from the kill until a one-second window's rows per second is back to 90% of ``base_rate``."""
    if base_rate <= 0:
        return None
    for t, _ in timeline:
        if t >= kill and _rate(timeline, t, t + 1.0) >= 0.9 * base_rate:
            return round(t - kill, 2)
    return None


async def run_all(plan: Plan, waits: Sequence[int], out: Path | None = None) -> list[dict[str, Any]]:
    """One run per submit WAIT value, each on a fresh cluster, against one embedded PostgreSQL; the JSON
    written to ``out`` after each run (a later run that hangs keeps the earlier ones)."""
    results: list[dict[str, Any]] = []
    with benchmark_servers() as urls:
        for wait in waits:
            cluster = EmbeddedCluster(Path(tempfile.mkdtemp(prefix="dragoman-failover-")), 3, 1)
            await asyncio.to_thread(cluster.up)
            try:
                result = await run_once(cluster, urls.database_url, plan, wait)
            finally:
                await asyncio.to_thread(cluster.down)
            results.append(result)
            print(_line(result), flush=True)
            if out is not None:
                _write(out, results)
    return results


def _write(out: Path, runs: list[dict[str, Any]]) -> None:
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d %H:%M")}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": runs, "machine": machine}, indent=2))


def _line(result: dict[str, Any]) -> str:
    return (
        f"wait-replicas {result['wait_replicas']}: {result['acknowledged']:,} acknowledged, {result['rows']:,} rows; "
        f"lost {result['lost']}, duplicated {result['duplicated']}, stuck {result['stuck']}; "
        f"failover {result['failover_s']} s, rows back to 90% after {result['recovered_after_s']} s, "
        f"shard 0 silent {result['shard0_longest_gap_s']} s; submit errors {result['submit_errors']}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs submitted in each run")
    parser.add_argument("--rate", type=float, default=1_000.0, help="jobs per second the producer submits")
    parser.add_argument("--chunk", type=int, default=50, help="jobs per submit call")
    parser.add_argument(
        "--wait-replicas", default="0,1", help="comma-separated DRAGOMAN_SUBMIT_WAIT_REPLICAS values, one run each"
    )
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds a run may take before it is counted")
    parser.add_argument(
        "--visibility-s", type=float, default=10.0, help="DRAGOMAN_VISIBILITY_TIMEOUT_SECONDS of the worker"
    )
    parser.add_argument(
        "--settle-s", type=float, default=20.0, help="quiet seconds (no engine call) ending a run once all rows are in"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/failover.json"), help="where the JSON goes")
    args = parser.parse_args(argv)
    args.wait_replicas = tuple(int(value) for value in args.wait_replicas.split(",") if value.strip())
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run once per ``--wait-replicas`` value, print a line each, write JSON with the machine."""
    args = parse_args(argv)
    plan = Plan(args.jobs, args.rate, args.chunk, args.deadline, args.visibility_s, args.settle_s)
    asyncio.run(run_all(plan, args.wait_replicas, args.out))


if __name__ == "__main__":
    main()
