"""The HTTP API's cost, side by side with the Python client, on this machine (zero-cost engine).

    python -m bench.api [--jobs 20000] [--single 5000] [--clients 16] [--batch-lines 100000]
                        [--rounds 2] [--truncate-jobs] [--out bench/out/api.json]

Measured in one run against one embedded Redis and PostgreSQL (or DRAGOMAN_REDIS_URL /
DRAGOMAN_DATABASE_URL, only with ``--truncate-jobs``: every job row there is deleted between
measurements) and a real ``dragoman api`` process (uvicorn, one process), the load coming from
``--clients`` concurrent keep-alive connections (aiohttp) in this process:

1. submit only (no worker): ``Client.submit_many`` against ``POST /v1/jobs`` with 100 jobs a
   request and with one job a request; the stream is emptied between them (not timed);
2. an OpenAI batch end to end: its JSONL uploaded (``/v1/files``), the batch created, drained by
   a zero-cost worker in a process of its own, polled until ``completed`` and its output file
   downloaded, against the same lines submitted natively three ways, each until the last row is
   written (or its results are downloaded): the same jobs through ``submit_many`` (independent
   jobs: no run, no tenant), the same lines as a native run from the Python client
   (``Client.submit_run`` of a JSONL file: jobs of a group, with line numbers, in the bulk lane, as
   a batch's are), and the same lines as a native run through the HTTP API with the same key
   (``POST /v1/runs``, polled, ``GET /v1/runs/{id}/results``: the same door, tenant and run as the
   batch, dragoman's own format). Each starts on emptied servers (every Redis key of the
   deployment and every job row dropped, untimed) with a fresh worker, and ``--rounds`` rounds
   alternate which side goes first; the ratios are the medians of each round's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import redis

from bench.enqueue import workload
from bench.servers import benchmark_servers, configured_servers
from broker.keys import RedisKeys
from contract.schemas import TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.sync_bridge import run_sync
from producer.client import Client
from storage import ApiKeyStore, AsyncConnectionPool, libpq_url

PER_REQUEST = 100
POLL_SECONDS = 1.0
"""How often the batch is polled (an SDK user polls every few seconds; each poll counts the run's rows)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def api_process(settings: Settings, log_path: Path, *, checkout: Path | None = None) -> Iterator[str]:
    """``dragoman api`` on a free port, as its own process; its base URL.

    ``checkout``: the source tree to run it from (another commit's, for a before/after), else this one.
    """
    port = _free_port()
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url or "",
        "DRAGOMAN_DATABASE_URL": settings.database_url or "",
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
    }
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "api", "--port", str(port)],
            stdout=log,
            stderr=log,
            env=env,
            cwd=checkout,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"dragoman api did not start; see {log_path}") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def _zero_cost_worker(settings_json: str, stop: Event) -> None:
    """A worker with the deterministic engine, in a process of its own, until ``stop`` is set."""
    from worker.deterministic_engine import DeterministicEngine
    from worker.profiles import IdentityProfile
    from worker.runtime import run_event_loop
    from worker.service import Worker

    settings = Settings.model_validate_json(settings_json)

    async def run() -> None:
        engine = DeterministicEngine()
        worker = Worker(
            settings,
            redis_url=settings.redis_url or "",
            database_url=settings.database_url or "",
            engine=engine,
            profile=IdentityProfile(engine.tokenizer),
            max_in_flight=512,
        )
        await worker.start()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await worker.stop()

    run_event_loop(run())


@contextmanager
def worker_process(settings: Settings) -> Iterator[None]:
    """The zero-cost worker running beside the API while the block runs."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    process = context.Process(target=_zero_cost_worker, args=(settings.model_dump_json(), stop))
    process.start()
    try:
        yield
    finally:
        stop.set()
        process.join(timeout=60)


def _empty_queue(settings: Settings, tenant: str) -> None:
    """Drop the jobs stream, the state records and the tenant's count (between measurements, not timed)."""
    keys = RedisKeys.from_settings(settings)
    client = redis.Redis.from_url(settings.redis_url or "")
    try:
        client.delete(keys.jobs_stream, keys.tenant_queued(tenant))
        for key in client.scan_iter(match=keys.state_pattern, count=10_000):
            client.unlink(key)
    finally:
        client.close()


async def post_all(base: str, key: str, bodies: list[bytes], clients: int) -> float:
    """POST every body to ``/v1/jobs`` over ``clients`` concurrent connections; the seconds it took."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    pending = iter(bodies)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(base, connector=connector, headers=headers) as session:

        async def client() -> None:
            for body in pending:
                async with session.post("/v1/jobs", data=body) as response:
                    if response.status != 202:
                        raise SystemExit(f"POST /v1/jobs answered {response.status}: {await response.text()}")
                    await response.read()

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return time.perf_counter() - start


def _job(item: TranslationRequest) -> dict[str, Any]:
    return {"text": item.text, "source_lang": item.source_lang, "target_lang": item.target_lang}


def bench_submit(
    settings: Settings, base: str, key: str, tenant: str, jobs: int, single: int, clients: int
) -> dict[str, Any]:
    """Client.submit_many, then the API with 100 jobs a request, then one job a request."""
    items = workload(max(jobs, single))
    with Client(settings) as client:
        start = time.perf_counter()
        client.submit_many(items[:jobs])
        many_s = time.perf_counter() - start
    _empty_queue(settings, tenant)
    batched = [json.dumps([_job(i) for i in items[n : n + PER_REQUEST]]).encode() for n in range(0, jobs, PER_REQUEST)]
    batched_s = asyncio.run(post_all(base, key, batched, clients))
    _empty_queue(settings, tenant)
    singles = [json.dumps(_job(item)).encode() for item in items[:single]]
    single_s = asyncio.run(post_all(base, key, singles, clients))
    _empty_queue(settings, tenant)
    return {
        "jobs": jobs,
        "clients": clients,
        "submit_many_jobs_per_s": round(jobs / many_s),
        "api_100_per_request_jobs_per_s": round(jobs / batched_s),
        "api_single_requests": single,
        "api_single_requests_per_s": round(single / single_s),
    }


def _batch_lines(count: int) -> bytes:
    return b"".join(
        json.dumps({"custom_id": f"r{n}", "method": "POST", "url": "/v1/translations", "body": _job(item)}).encode()
        + b"\n"
        for n, item in enumerate(workload(count, seed=2))
    )


async def batch_round_trip(base: str, key: str, content: bytes) -> tuple[dict[str, float], int]:
    """Upload, create, poll until completed, download the output; each phase's end (seconds) and the output's lines."""
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(base, headers=headers, timeout=aiohttp.ClientTimeout(total=3_600)) as session:
        start = time.perf_counter()
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", content, filename="input.jsonl", content_type="application/jsonl")
        async with session.post("/v1/files", data=form) as response:
            uploaded = await response.json()
        phases = {"uploaded": time.perf_counter() - start}
        request = {"input_file_id": uploaded["id"], "endpoint": "/v1/translations", "completion_window": "24h"}
        async with session.post("/v1/batches", json=request) as response:
            batch = await response.json()
        phases["create_answered"] = time.perf_counter() - start
        while batch["status"] not in ("completed", "failed", "expired", "cancelled"):
            await asyncio.sleep(POLL_SECONDS)
            async with session.get(f"/v1/batches/{batch['id']}") as response:
                batch = await response.json()
            if batch["status"] != "validating":
                phases.setdefault("enqueued", time.perf_counter() - start)
            if (
                batch["request_counts"]["completed"] + batch["request_counts"]["failed"]
                == batch["request_counts"]["total"]
            ):
                phases.setdefault("jobs_done", time.perf_counter() - start)
        phases["completed"] = time.perf_counter() - start
        if batch["status"] != "completed":
            raise SystemExit(f"the batch ended {batch['status']}: {batch.get('errors')}")
        async with session.get(f"/v1/files/{batch['output_file_id']}/content") as response:
            lines = (await response.read()).count(b"\n")
        phases["downloaded"] = time.perf_counter() - start
        return {name: round(seconds, 2) for name, seconds in phases.items()}, lines


def _row_count(database_url: str) -> int:
    with psycopg.connect(libpq_url(database_url)) as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    return int(row[0]) if row else 0


def _timed_until_rows(settings: Settings, count: int, submit: Callable[[Client], object]) -> float:
    """Seconds from ``submit`` (given a client) until the worker has written ``count`` more rows."""
    database_url = settings.database_url or ""
    target = _row_count(database_url) + count
    start = time.perf_counter()
    with Client(settings) as client:
        submit(client)
    while _row_count(database_url) < target:
        time.sleep(POLL_SECONDS)
    return time.perf_counter() - start


def native_round_trip(settings: Settings, count: int) -> float:
    """The same jobs through submit_many, until the worker has written the last row; the seconds."""
    items = workload(count, seed=2)
    return _timed_until_rows(settings, count, lambda client: client.submit_many(items))


def _run_lines(count: int) -> bytes:
    return b"".join(
        json.dumps({"custom_id": f"r{n}", **_job(item)}).encode() + b"\n"
        for n, item in enumerate(workload(count, seed=2))
    )


def native_run_round_trip(settings: Settings, count: int) -> float:
    """The same lines as a native run (``Client.submit_run`` of a JSONL file), until the worker has
    written the last row; the seconds (writing the file is not timed)."""
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-run-") as folder:
        path = Path(folder) / "run.jsonl"
        path.write_bytes(_run_lines(count))
        return _timed_until_rows(settings, count, lambda client: client.submit_run(path))


TRUNCATE_REFUSED = (
    "bench.api empties the jobs table between its measurements (TRUNCATE jobs), and DRAGOMAN_REDIS_URL and "
    "DRAGOMAN_DATABASE_URL name servers it did not start: every job row there would be deleted. Unset them to "
    "measure on embedded servers of its own, or pass --truncate-jobs if every job row of that database may go."
)


def reset_state(settings: Settings, *, truncate_configured: bool = False) -> None:
    """Forget what earlier measurements left (not timed): every Redis key of the deployment and every
    job row, so that each end-to-end measurement starts from the same empty servers.

    Without it the measurement run last found the earlier ones' 100,000s of state records and rows
    (Redis's keyspace and the jobs table's indexes grown, autovacuum at work) and paid for them: the
    same batch took 9.6 s to drain first and 14.5 s after two others (a throwaway script, this machine).
    Every job row goes, not only the benchmark's: on servers the user configured (``configured_servers``)
    it refuses (``SystemExit``) unless ``truncate_configured`` (``--truncate-jobs``).
    """
    if configured_servers() and not truncate_configured:
        raise SystemExit(TRUNCATE_REFUSED)
    client = redis.Redis.from_url(settings.redis_url or "")
    try:
        keys = RedisKeys.from_settings(settings)
        for pattern in (f"{keys.prefix}:*", f"{keys.tag}:*"):  # untagged names, and those scripts touch
            for key in client.scan_iter(match=pattern, count=10_000):
                client.unlink(key)
    finally:
        client.close()
    with psycopg.connect(libpq_url(settings.database_url or ""), autocommit=True) as conn:
        conn.execute("TRUNCATE jobs")
        conn.execute("VACUUM ANALYZE jobs")


async def api_run_round_trip(base: str, key: str, content: bytes) -> tuple[float, int]:
    """The same lines as a native run through the HTTP API with the same key: ``POST /v1/runs`` (the JSONL
    streamed in, validated, queued), polled until no job is pending, its results downloaded; the seconds
    and the result lines."""
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(base, headers=headers, timeout=aiohttp.ClientTimeout(total=3_600)) as session:
        start = time.perf_counter()
        async with session.post("/v1/runs", data=content, headers={"Content-Type": "application/x-ndjson"}) as response:
            run = await response.json()
            if response.status != 202:
                raise SystemExit(f"POST /v1/runs answered {response.status}: {run}")
        while run["counts"]["pending"] or run["status"] == "submitting":
            await asyncio.sleep(POLL_SECONDS)
            async with session.get(f"/v1/runs/{run['id']}") as response:
                run = await response.json()
        async with session.get(f"/v1/runs/{run['id']}/results") as response:
            lines = (await response.read()).count(b"\n")
        return time.perf_counter() - start, lines


def measure_batch_round(
    settings: Settings,
    base: str,
    key: str,
    lines: int,
    content: bytes,
    order: list[str],
    truncate_configured: bool = False,
) -> dict[str, Any]:
    """One round: the native jobs, the native run and the OpenAI batch, in ``order``, each on emptied
    servers with a fresh worker; their seconds (and the batch's phases)."""
    measured: dict[str, Any] = {"order": order}
    run_content = _run_lines(lines)
    for what in order:
        reset_state(settings, truncate_configured=truncate_configured)
        with worker_process(settings):
            if what == "native":
                measured["native_seconds"] = round(native_round_trip(settings, lines), 2)
            elif what == "native_run":
                measured["native_run_seconds"] = round(native_run_round_trip(settings, lines), 2)
            elif what == "api_run":
                seconds, result_lines = asyncio.run(api_run_round_trip(base, key, run_content))
                assert result_lines == lines, f"{result_lines} result lines for {lines} input lines"
                measured["api_run_seconds"] = round(seconds, 2)
            else:
                phases, output_lines = asyncio.run(batch_round_trip(base, key, content))
                assert output_lines == lines, f"{output_lines} output lines for {lines} input lines"
                measured["batch_seconds"] = phases["downloaded"]
                measured["batch_phases_seconds"] = phases
    measured["batch_vs_native"] = round(measured["batch_seconds"] / measured["native_seconds"], 3)
    measured["batch_vs_native_run"] = round(measured["batch_seconds"] / measured["native_run_seconds"], 3)
    measured["batch_vs_api_run"] = round(measured["batch_seconds"] / measured["api_run_seconds"], 3)
    return measured


ORDERS = (["native", "native_run", "api_run", "batch"], ["batch", "api_run", "native_run", "native"])
"""Rounds alternate these orders, so that neither side always runs first on a fresh machine."""


def bench_batch(
    settings: Settings, base: str, key: str, lines: int, rounds: int, truncate_configured: bool = False
) -> dict[str, Any]:
    """An OpenAI batch of ``lines`` end to end against the same jobs submitted natively (one by one,
    and as a run), ``rounds`` times in alternating order; each round's numbers and their medians."""
    content = _batch_lines(lines)
    results = []
    for number in range(rounds):
        order = ORDERS[number % 2]
        results.append(measure_batch_round(settings, base, key, lines, content, order, truncate_configured))
        done = results[-1]
        print(
            f"round {number + 1} ({', '.join(done['order'])}): native {done['native_seconds']} s, "
            f"run {done['native_run_seconds']} s, API run {done['api_run_seconds']} s, "
            f"batch {done['batch_seconds']} s ({done['batch_vs_native']}x)",
            flush=True,
        )
    native_s = statistics.median(r["native_seconds"] for r in results)
    run_s = statistics.median(r["native_run_seconds"] for r in results)
    api_run_s = statistics.median(r["api_run_seconds"] for r in results)
    batch_s = statistics.median(r["batch_seconds"] for r in results)
    return {
        "lines": lines,
        "input_bytes": len(content),
        "rounds": results,
        "native_seconds": native_s,
        "native_jobs_per_s": round(lines / native_s),
        "native_run_seconds": run_s,
        "native_run_jobs_per_s": round(lines / run_s),
        "api_run_seconds": api_run_s,
        "api_run_jobs_per_s": round(lines / api_run_s),
        "batch_seconds": batch_s,
        "batch_jobs_per_s": round(lines / batch_s),
        "median_round_ratio": statistics.median(r["batch_vs_native"] for r in results),
        "median_round_ratio_vs_run": statistics.median(r["batch_vs_native_run"] for r in results),
        "median_round_ratio_vs_api_run": statistics.median(r["batch_vs_api_run"] for r in results),
    }


def api_key(settings: Settings, tenant: str) -> str:
    """A new API key of ``tenant`` with limits no benchmark reaches."""

    async def create() -> str:
        pool = AsyncConnectionPool(settings.database_url or "", max_connections=1)
        try:
            store = ApiKeyStore(pool)
            return (await store.create(tenant, tenant=tenant, rate_limit_per_minute=10**9, max_queued_jobs=10**8))[1]
        finally:
            await pool.close()

    return run_sync(create())


def run(urls: ServiceUrls, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """Both measurements on one set of servers and one API process."""
    settings = Settings(
        redis_url=urls.redis_url, database_url=urls.database_url, key_prefix=f"bench-{uuid.uuid4().hex[:8]}"
    )
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    key = api_key(settings, tenant)
    with api_process(settings, log_dir / "api.log") as base:
        submit = bench_submit(settings, base, key, tenant, args.jobs, args.single, args.clients)
        batch = bench_batch(settings, base, key, args.batch_lines, args.rounds, args.truncate_jobs)
    return {
        "submit": submit,
        "batch": batch,
        "ratios": {
            "api_batched_vs_submit_many": round(
                submit["api_100_per_request_jobs_per_s"] / submit["submit_many_jobs_per_s"], 3
            ),
            "batch_time_vs_native": batch["median_round_ratio"],
            "batch_time_vs_native_run": batch["median_round_ratio_vs_run"],
            "batch_time_vs_api_run": batch["median_round_ratio_vs_api_run"],
        },
    }


def main() -> None:
    """Run both measurements once, print them, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs for the submit comparison")
    parser.add_argument("--single", type=int, default=5_000, help="one-job requests")
    parser.add_argument("--clients", type=int, default=16, help="concurrent connections")
    parser.add_argument("--batch-lines", type=int, default=100_000, help="lines of the OpenAI batch")
    parser.add_argument("--rounds", type=int, default=2, help="end-to-end rounds, alternating which side runs first")
    parser.add_argument(
        "--truncate-jobs",
        action="store_true",
        help="with DRAGOMAN_REDIS_URL and DRAGOMAN_DATABASE_URL set: empty that database's jobs table between "
        "measurements (every job row of it goes); without it, such servers are refused",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/api.json"))
    args = parser.parse_args()
    if configured_servers():
        if not args.truncate_jobs:
            parser.error(TRUNCATE_REFUSED)
        print(
            "WARNING: every job row of DRAGOMAN_DATABASE_URL's jobs table will be deleted (--truncate-jobs)",
            file=sys.stderr,
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-api-") as logs, benchmark_servers() as urls:
        result = run(urls, args, Path(logs))
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "when": time.strftime("%F %R")}
    submit, batch = result["submit"], result["batch"]
    print(f"Client.submit_many:                {submit['submit_many_jobs_per_s']:>8,} jobs/s")
    print(f"POST /v1/jobs, 100 jobs a request: {submit['api_100_per_request_jobs_per_s']:>8,} jobs/s")
    print(f"POST /v1/jobs, one job a request:  {submit['api_single_requests_per_s']:>8,} requests/s")
    print(f"{batch['lines']:,} jobs natively, end to end: {batch['native_seconds']:.1f} s")
    print(f"{batch['lines']:,} lines as a native run, end to end: {batch['native_run_seconds']:.1f} s")
    print(f"{batch['lines']:,} lines as a run through the API, upload to results: {batch['api_run_seconds']:.1f} s")
    print(f"{batch['lines']:,}-line OpenAI batch, upload to output: {batch['batch_seconds']:.1f} s")
    print(f"ratios: {result['ratios']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
