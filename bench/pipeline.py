"""The pipeline's own overhead on the CPU, side by side with what people use instead and the raw ceilings.

    python -m bench.pipeline [--jobs 100000] [--rq-jobs 3000] [--out bench/out/pipeline.json]
    python -m bench.pipeline --quality-rounds 3 --jobs 20000   # the quality checks' cost: off/on side by side
    python -m bench.pipeline --against main --rounds 3 --jobs 20000   # this tree against main, alternating

Measured in one run, against one embedded Redis and PostgreSQL (or DRAGOMAN_REDIS_URL /
DRAGOMAN_DATABASE_URL):
1. dragoman end to end with a zero-cost engine: jobs already in the stream -> worker ->
   rows committed -> acked -> events published (timed until the last row is written);
2. RQ's SimpleWorker running no-op jobs (enqueue not timed), the usual hand-rolled alternative;
3. the raw Redis Streams ceiling: pipelined XREADGROUP + XACK + XADD of an event, no work;
4. the raw PostgreSQL ceiling: the same batched upsert statement, rows only.
Plus the producer's enqueue rate (submit_many), measured while filling the stream for (1).

With ``--quality-rounds N`` it measures only (1), N times with the quality checks off
(``DRAGOMAN_QUALITY_CHECKS=false``) and N times on, alternating, against the same servers. With
``--quality-output reversed`` (the default) the zero-cost engine answers each word spelled
backwards: a "translation" that shares no word with its source, so the checks take their usual
path (the language detector reads every output); with ``echo`` it answers the English source of
the en->fr job, so every check runs to its end and every row stores flags (the worst case).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import redis
import redis.asyncio as aioredis

from bench.against import compare_against
from bench.enqueue import workload
from bench.servers import benchmark_servers
from bench.shards import spread_prefix
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url
from storage.embedded_cluster import EmbeddedCluster
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest
from worker.profiles import IdentityProfile
from worker.runtime import freeze_startup_heap, run_event_loop
from worker.service import Worker


def noop() -> None:
    """The job RQ runs: nothing."""


def _settings(
    urls: ServiceUrls, *, quality_checks: bool = True, shards: int = 1, prefix: str | None = None
) -> Settings:
    return Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        key_prefix=prefix or f"bench-{uuid.uuid4().hex[:8]}",
        quality_checks=quality_checks,
        redis_shards=shards,
    )


class RedisTarget:
    """Where the pipeline's Redis is: the benchmark's own server (``single``) or a local 3-primary
    Redis Cluster (``cluster``, one replica each), and how to read its primaries' CPU time."""

    def __init__(self, kind: str, urls: ServiceUrls, cluster: EmbeddedCluster | None = None) -> None:
        self.kind = kind
        self.urls = urls if cluster is None else ServiceUrls(redis_url=cluster.url, database_url=urls.database_url)
        self.cluster = cluster

    def prefix(self, shards: int) -> str:
        """A fresh key prefix; on a cluster, one whose shards sit on different primaries."""
        return f"bench-{uuid.uuid4().hex[:8]}" if self.cluster is None else spread_prefix(self.cluster, shards)

    def cpu_seconds(self) -> float:
        """used_cpu_sys + used_cpu_user summed over the primaries (each its own process)."""
        if self.cluster is None:
            clients = [redis.Redis.from_url(self.urls.redis_url)]
        else:
            ports = [node.port for node in self.cluster.nodes() if node.role == "primary"]
            clients = [redis.Redis(host="127.0.0.1", port=port) for port in ports]
        total = 0.0
        for client in clients:
            with client:
                info = client.info("cpu")
            total += float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        return total


@contextmanager
def redis_targets(kinds: Sequence[str], urls: ServiceUrls) -> Iterator[dict[str, RedisTarget]]:
    """Each of ``kinds`` (``single``, ``cluster``) as a :class:`RedisTarget`; a cluster is started for the
    run (``storage.embedded_cluster``) and stopped afterwards."""
    cluster: EmbeddedCluster | None = None
    folder = Path(tempfile.mkdtemp(prefix="dragoman-bench-cluster-"))
    try:
        if "cluster" in kinds:
            cluster = EmbeddedCluster(folder)
            cluster.up()
        yield {kind: RedisTarget(kind, urls, cluster if kind == "cluster" else None) for kind in kinds}
    finally:
        if cluster is not None:
            cluster.down()
        shutil.rmtree(folder, ignore_errors=True)


def reversed_words(text: str, _: GenerationRequest) -> str:
    """A stand-in translation that shares no word with its source (each word spelled backwards)."""
    return " ".join(word[::-1] for word in text.split(" "))


async def _run_worker(
    settings: Settings, urls: ServiceUrls, jobs: int, max_in_flight: int, *, translate: bool = False
) -> tuple[float, float]:
    """Seconds and this process's CPU seconds (the worker's, not its check processes') to finish ``jobs``.

    Timed from a started worker: the check processes' spawn (once a worker, 1-2 s) is left out.
    """
    engine = DeterministicEngine(rewrite=reversed_words if translate else None)
    worker = Worker(
        settings,
        redis_url=settings.redis_url or urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=IdentityProfile(engine.tokenizer),
        max_in_flight=max_in_flight,
    )
    await worker.start()
    start, cpu = time.perf_counter(), time.process_time()
    while worker.writer.stats.rows < jobs:
        await asyncio.sleep(0.005)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await worker.stop()
    return elapsed, cpu


def bench_dragoman(
    urls: ServiceUrls,
    jobs: int,
    max_in_flight: int,
    *,
    quality_checks: bool = True,
    translate: bool = False,
    target: RedisTarget | None = None,
    shards: int = 1,
) -> dict[str, Any]:
    """Enqueue ``jobs`` (timed: the producer rate), then process them (timed: the pipeline rate).

    With a ``target``, Redis is that one (with ``shards`` shards) and the primaries' CPU time per job
    is measured for each phase."""
    if target is not None:
        urls = target.urls
    settings = _settings(
        urls, quality_checks=quality_checks, shards=shards, prefix=target.prefix(shards) if target else None
    )
    items = workload(jobs)
    with Client(settings) as client:
        redis_cpu = target.cpu_seconds() if target else 0.0
        start = time.perf_counter()
        client.submit_many(items)
        enqueue_s = time.perf_counter() - start
    del items
    submit_cpu = target.cpu_seconds() - redis_cpu if target else 0.0
    freeze_startup_heap()  # what `dragoman worker` does before jobs flow
    redis_cpu = target.cpu_seconds() if target else 0.0
    elapsed, cpu = run_event_loop(_run_worker(settings, urls, jobs, max_in_flight, translate=translate))
    worker_redis_cpu = target.cpu_seconds() - redis_cpu if target else 0.0
    result: dict[str, Any] = {
        "jobs": jobs,
        "max_in_flight": max_in_flight,
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(jobs / elapsed),
        "worker_cpu_us_per_job": round(cpu / jobs * 1e6),
        "enqueue_jobs_per_s": round(jobs / enqueue_s),
    }
    if target is not None:
        result |= {
            "redis": target.kind,
            "shards": shards,
            "redis_cpu_us_per_job_worker": round(worker_redis_cpu / jobs * 1e6, 1),
            "redis_cpu_us_per_job_submit": round(submit_cpu / jobs * 1e6, 1),
        }
    return result


def bench_targets(
    urls: ServiceUrls, kinds: Sequence[str], shard_counts: Sequence[int], jobs: int, max_in_flight: int, rounds: int
) -> dict[str, Any]:
    """The pipeline on each Redis kind with each number of shards, side by side (configurations alternate
    within each round); every run and each configuration's median."""
    runs: list[dict[str, Any]] = []
    with redis_targets(kinds, urls) as targets:
        for round_number in range(rounds):
            for kind in kinds:
                for shards in shard_counts:
                    result = bench_dragoman(urls, jobs, max_in_flight, target=targets[kind], shards=shards)
                    result["round"] = round_number + 1
                    runs.append(result)
                    print(
                        f"round {round_number + 1}: {kind:<7} {shards} shard(s) {result['jobs_per_s']:>7,} jobs/s, "
                        f"Redis {result['redis_cpu_us_per_job_worker']} us/job (worker) + "
                        f"{result['redis_cpu_us_per_job_submit']} us/job (submit), enqueue "
                        f"{result['enqueue_jobs_per_s']:,} jobs/s",
                        flush=True,
                    )
    medians: dict[str, Any] = {}
    for kind in kinds:
        for shards in shard_counts:
            mine = sorted(
                (r for r in runs if r["redis"] == kind and r["shards"] == shards), key=lambda r: r["jobs_per_s"]
            )
            middle = mine[len(mine) // 2]
            medians[f"{kind}-{shards}"] = {
                key: middle[key]
                for key in (
                    "jobs_per_s",
                    "redis_cpu_us_per_job_worker",
                    "redis_cpu_us_per_job_submit",
                    "enqueue_jobs_per_s",
                )
            }
    return {"jobs": jobs, "runs": runs, "median": medians}


def bench_rq(urls: ServiceUrls, jobs: int) -> dict[str, Any]:
    """RQ SimpleWorker draining ``jobs`` no-op jobs in burst mode."""
    from rq import Queue, SimpleWorker

    connection = redis.Redis.from_url(urls.redis_url)
    queue = Queue(f"bench-{uuid.uuid4().hex[:8]}", connection=connection)
    queue.enqueue_many([Queue.prepare_data(noop) for _ in range(jobs)])
    worker = SimpleWorker([queue], connection=connection)
    start = time.perf_counter()
    worker.work(burst=True, logging_level="WARNING")
    elapsed = time.perf_counter() - start
    finished = queue.finished_job_registry.count
    queue.delete(delete_jobs=True)
    connection.close()
    return {"jobs": jobs, "finished": finished, "seconds": round(elapsed, 3), "jobs_per_s": round(jobs / elapsed)}


async def _raw_streams(url: str, jobs: int, batch: int) -> float:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    stream, events, consumer_group = f"raw-{uuid.uuid4().hex[:8]}", f"raw-ev-{uuid.uuid4().hex[:8]}", "g"
    payload = json.dumps({"text": "x" * 200, "source_lang": "en", "target_lang": "fr"})
    for start in range(0, jobs, 5000):
        async with client.pipeline(transaction=False) as pipe:
            for i in range(start, min(start + 5000, jobs)):
                pipe.xadd(stream, {"v": "1", "id": str(i), "payload": payload})
            await pipe.execute()
    await client.xgroup_create(stream, consumer_group, id="0")
    done = 0
    begin = time.perf_counter()
    while done < jobs:
        response: Any = await client.xreadgroup(consumer_group, "c", {stream: ">"}, count=batch)
        entries = response[0][1]
        async with client.pipeline(transaction=True) as pipe:
            pipe.xack(stream, consumer_group, *[entry_id for entry_id, _ in entries])
            for entry_id, _ in entries:
                pipe.xadd(events, {"id": entry_id, "status": "succeeded"})
            await pipe.execute()
        done += len(entries)
    elapsed = time.perf_counter() - begin
    await client.delete(stream, events)
    await client.aclose()
    return elapsed


def bench_raw_streams(urls: ServiceUrls, jobs: int, batch: int = 256) -> dict[str, Any]:
    """Consume + ack + one event per entry, pipelined, no work at all."""
    elapsed = asyncio.run(_raw_streams(urls.redis_url, jobs, batch))
    return {"entries": jobs, "batch": batch, "seconds": round(elapsed, 3), "entries_per_s": round(jobs / elapsed)}


def bench_raw_postgres(urls: ServiceUrls, rows: int, batch: int = 256) -> dict[str, Any]:
    """The writer's upsert statement alone, ``batch`` rows of the same texts per transaction."""
    from storage.jobs import UPSERT_SQL, RowRecord

    encode = msgspec.json.Encoder().encode
    now = time.time()
    texts = [item.text for item in workload(rows)]
    with psycopg.connect(libpq_url(urls.database_url), autocommit=True) as conn:
        begin = time.perf_counter()
        for start in range(0, rows, batch):
            records = [
                RowRecord(
                    str(uuid.uuid4()),
                    "succeeded",
                    "en",
                    "fr",
                    text,
                    text,
                    None,
                    1,
                    "bench",
                    10,
                    10,
                    now,
                    now,
                    now,
                    {"n": 1},
                    None,
                    None,
                    None,
                )
                for text in texts[start : start + batch]
            ]
            with conn.transaction():
                conn.execute(UPSERT_SQL, (encode(records).decode(),), binary=True).fetchall()
        elapsed = time.perf_counter() - begin
        conn.execute("DELETE FROM jobs WHERE model = 'bench'")
    return {"rows": rows, "batch": batch, "seconds": round(elapsed, 3), "rows_per_s": round(rows / elapsed)}


def bench_quality(urls: ServiceUrls, jobs: int, max_in_flight: int, rounds: int, output: str) -> dict[str, Any]:
    """The pipeline with the quality checks off and on, alternating, ``rounds`` times each."""
    runs: dict[str, list[int]] = {"off": [], "on": []}
    cpu: dict[str, list[int]] = {"off": [], "on": []}
    translate = output == "reversed"
    for round_number in range(rounds):
        for label, checks in (("off", False), ("on", True)):
            result = bench_dragoman(urls, jobs, max_in_flight, quality_checks=checks, translate=translate)
            rate, worker_cpu = result["jobs_per_s"], result["worker_cpu_us_per_job"]
            runs[label].append(rate)
            cpu[label].append(worker_cpu)
            print(
                f"round {round_number + 1}: checks {label:<3} {rate:,} jobs/s, worker CPU {worker_cpu} us/job",
                flush=True,
            )
    medians = {label: sorted(rates)[len(rates) // 2] for label, rates in runs.items()}
    cpu_medians = {label: sorted(values)[len(values) // 2] for label, values in cpu.items()}
    return {
        "jobs": jobs,
        "output": output,
        "runs": runs,
        "median": medians,
        "worker_cpu_us_per_job": cpu,
        "worker_cpu_us_per_job_median": cpu_medians,
        "on_vs_off": round(medians["on"] / medians["off"], 3),
    }


def main() -> None:
    """Run every measurement once, print a table, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rq-jobs", type=int, default=3_000)
    parser.add_argument("--max-in-flight", type=int, default=512)
    parser.add_argument("--out", type=Path, default=Path("bench/out/pipeline.json"))
    parser.add_argument("--quality-rounds", type=int, default=0, help="only the quality checks' cost, N rounds")
    parser.add_argument(
        "--quality-output",
        choices=("reversed", "echo"),
        default="reversed",
        help="what the zero-cost engine answers: each word reversed (a 'translation' sharing no word with its "
        "source: the usual path) or the source itself (untranslated: every check runs to its end)",
    )
    parser.add_argument(
        "--redis",
        default="single",
        help="comma-separated Redis kinds: single (the benchmark's own server), cluster (a local 3-primary Redis "
        "Cluster); with more than one kind or shard count, only the dragoman pipeline is measured, side by side",
    )
    parser.add_argument(
        "--shards", default="1", help="comma-separated DRAGOMAN_REDIS_SHARDS values to run on each --redis kind"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the --redis/--shards or --against comparison")
    parser.add_argument(
        "--against",
        metavar="REF",
        help="run this tree and REF (a branch, tag or commit) alternately, --rounds times each, and print the ratio "
        "of their pipelines (bench/against.py): run it before landing a change to the worker, broker or storage",
    )
    args = parser.parse_args()
    if args.against:
        compared = compare_against(args.against, max(args.rounds, 1), args.jobs, args.rq_jobs)
        tree, ref = compared["tree"], compared["against"]
        print(
            f"this tree {tree['jobs_per_s_median']:,} jobs/s ({tree['share_of_raw_streams_median']} of raw streams), "
            f"{args.against} {ref['jobs_per_s_median']:,} jobs/s ({ref['share_of_raw_streams_median']}): "
            f"ratio {compared['tree_vs_ref']} (medians of {compared['rounds']} rounds)"
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(compared, indent=2))
        return
    kinds = tuple(kind.strip() for kind in args.redis.split(",") if kind.strip())
    shard_counts = tuple(int(n) for n in args.shards.split(",") if n.strip())
    unknown = [kind for kind in kinds if kind not in ("single", "cluster")]
    if unknown or not kinds or not shard_counts:
        parser.error(f"--redis takes single and/or cluster (got {args.redis!r}); --shards one or more numbers")

    if kinds != ("single",) or shard_counts != (1,):
        with benchmark_servers() as urls:
            compared = bench_targets(urls, kinds, shard_counts, args.jobs, args.max_in_flight, args.rounds)
        compared["machine"] = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "when": time.strftime("%Y-%m-%d %H:%M"),
        }
        print(json.dumps(compared["median"], indent=2))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(compared, indent=2))
        return

    if args.quality_rounds:
        with benchmark_servers() as urls:
            quality = bench_quality(urls, args.jobs, args.max_in_flight, args.quality_rounds, args.quality_output)
        print(
            f"median: off {quality['median']['off']:,}, on {quality['median']['on']:,} jobs/s "
            f"(on/off {quality['on_vs_off']})"
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(quality, indent=2))
        return

    with benchmark_servers() as urls:
        result: dict[str, Any] = {
            "dragoman": bench_dragoman(urls, args.jobs, args.max_in_flight),
            "rq_simple_worker": bench_rq(urls, args.rq_jobs),
            "raw_streams": bench_raw_streams(urls, args.jobs),
            "raw_postgres": bench_raw_postgres(urls, args.jobs),
        }
    d, rq_ = result["dragoman"], result["rq_simple_worker"]
    result["ratios"] = {
        "dragoman_vs_rq": round(d["jobs_per_s"] / rq_["jobs_per_s"], 1),
        "dragoman_vs_raw_streams": round(d["jobs_per_s"] / result["raw_streams"]["entries_per_s"], 3),
        "dragoman_vs_raw_postgres": round(d["jobs_per_s"] / result["raw_postgres"]["rows_per_s"], 3),
    }
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(f"dragoman end to end (zero-cost engine): {d['jobs']:,} jobs, {d['jobs_per_s']:,} jobs/s")
    print(f"producer submit_many:                   {d['enqueue_jobs_per_s']:,} jobs/s")
    print(f"RQ SimpleWorker, no-op jobs:            {rq_['jobs']:,} jobs, {rq_['jobs_per_s']:,} jobs/s")
    print(f"raw XREADGROUP+XACK+event ceiling:      {result['raw_streams']['entries_per_s']:,} entries/s")
    print(f"raw PostgreSQL batched upsert ceiling:  {result['raw_postgres']['rows_per_s']:,} rows/s")
    print(f"ratios: {result['ratios']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
