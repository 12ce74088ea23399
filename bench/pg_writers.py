"""How many rows/s PostgreSQL sustains from many writers into the partitioned ``jobs`` table.

    python -m bench.pg_writers --writers 1,2,4,8,16 --seconds 15 [--usage shared,per-writer]

For each K of ``--writers``: K processes, each with its own connection, each running the worker's
real write path (``storage.jobs.JobRowWriter.write_rows``: the one upsert statement of migration
0022, batches of ``writer_batch_size`` = 256 rows, one transaction each, as ``worker.writer``)
of new UUIDv7 jobs (``contract.ids.new_job_id``) into the table partitioned by day, for
``--seconds`` after a warm-up batch each. The table and ``usage_daily`` are emptied and a
CHECKPOINT taken before each K, so every K starts alike.

Reported per K: total rows/s (all writers' rows over the wall time from the start signal to the
last writer's end), each writer's rows/s and batch latency, PostgreSQL's CPU per row (user +
system CPU deltas of the postmaster and every child process, by psutil, over the run), the
writers' own CPU, WAL bytes per row (``pg_current_wal_lsn`` delta) and what the writers' backends
were waiting on (``pg_stat_activity`` sampled every 50 ms: CPU, a lock, WAL I/O...).

``--usage`` says whose ``usage_daily`` row a batch updates: ``shared`` (every row with no tenant
and one model, as a single-tenant deployment: all writers update the same row, locked from the
update to the commit) and/or ``per-writer`` (each writer's rows carry their own tenant: the table's
write cost without that one hot row).

The PostgreSQL is the embedded one (``bench.servers``, a fresh data folder; or the configured
``DRAGOMAN_DATABASE_URL``, whose ``jobs`` table is then emptied) with the wheel's default settings,
which are reported (shared_buffers, synchronous_commit, fsync, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing
import os
import platform
import statistics
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs installed
import psycopg

from bench.servers import benchmark_servers
from contract.errors import DragomanError
from contract.ids import new_job_id
from contract.settings import Settings
from storage import RowRecord, libpq_url
from storage.jobs import JobRowWriter
from storage.partitions import create_partitions

BATCH = Settings.model_fields["writer_batch_size"].default  # the worker's writer batch: 256 rows
USAGE_MODES = ("shared", "per-writer")
SHOWN_SETTINGS = (
    "server_version",
    "shared_buffers",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "wal_level",
    "wal_buffers",
    "max_wal_size",
    "checkpoint_timeout",
    "commit_delay",
    "max_connections",
    "work_mem",
    "autovacuum",
)
TEXT = "Segment {n} of a writer batch, about as long as a sentence of a document to translate."
SAMPLE_S = 0.05


class WriterBenchError(DragomanError):
    """A writer process failed or the run did not write what it reports."""


@dataclass
class WriterResult:
    """One writer process's run: rows committed, its time, its batches' latencies and its own CPU."""

    index: int
    rows: int = 0
    seconds: float = 0.0
    batch_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    error: str = ""


def _records(tenant: str | None, start: int) -> list[RowRecord]:
    """One writer batch of new UUIDv7 jobs, as ``worker.writer._records`` makes them for succeeded jobs."""
    now = time.time()
    return [
        RowRecord(new_job_id(), "succeeded", "en", "fr", TEXT.format(n=start + n), TEXT.format(n=start + n), None,
                  1, "bench", 20, 22, now - 0.5, now - 0.2, now, {"n": n}, None, None, None, tenant)
        for n in range(BATCH)
    ]  # fmt: skip


async def _write(index: int, url: str, seconds: float, tenant: str | None, barrier: Barrier) -> WriterResult:
    result = WriterResult(index)
    writer = JobRowWriter(url)
    try:
        await writer.write_rows(_records(tenant, 0))  # connect and warm up (not counted)
        await asyncio.to_thread(barrier.wait)  # all connected
        await asyncio.to_thread(barrier.wait)  # the start signal (after the CPU snapshot)
        cpu = time.process_time()
        begin = time.perf_counter()
        deadline = begin + seconds
        while time.perf_counter() < deadline:
            records = _records(tenant, result.rows)
            sent = time.perf_counter()
            written, _ = await writer.write_rows(records)
            result.batch_ms.append((time.perf_counter() - sent) * 1000)
            if len(written) != len(records):
                raise WriterBenchError(f"writer {index}: {len(written)} of {len(records)} rows written")
            result.rows += len(written)
        result.seconds = time.perf_counter() - begin
        result.cpu_s = time.process_time() - cpu
        await asyncio.to_thread(barrier.wait)  # done (the main process takes its CPU snapshot)
        await asyncio.to_thread(barrier.wait)  # released: close the connection
    finally:
        await writer.close()
    return result


def _writer_process(index: int, url: str, seconds: float, tenant: str | None, barrier: Barrier, out: Any) -> None:
    """One writer process: its own event loop and connection; its result (or its error) onto ``out``."""
    try:
        out.put(asdict(asyncio.run(_write(index, url, seconds, tenant, barrier))))
    except BaseException as exc:
        barrier.abort()
        out.put(asdict(WriterResult(index, error=f"{type(exc).__name__}: {exc}")))


def _postgres_processes(conn: psycopg.Connection[Any]) -> list[psutil.Process]:
    """The postmaster (its pid from ``postmaster.pid``) and every process it started; none for a server
    whose data folder is not on this machine."""
    row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    try:
        pid = int((Path(row[0]) / "postmaster.pid").read_text().split()[0])
        postmaster = psutil.Process(pid)
        return [postmaster, *postmaster.children(recursive=True)]
    except (OSError, ValueError, psutil.Error):  # a server on another machine: its CPU is not measured
        return []


def _cpu_snapshot(conn: psycopg.Connection[Any]) -> dict[int, float]:
    """User + system CPU seconds of each PostgreSQL process now, by pid."""
    times: dict[int, float] = {}
    for process in _postgres_processes(conn):
        try:
            cpu = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        times[process.pid] = cpu.user + cpu.system
    return times


def _cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two snapshots; a process started in between counts whole (one that
    ended in between is lost: none of the writers' backends does)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _wal_lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _sample_waits(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    """Every :data:`SAMPLE_S`, what each writer backend is doing: ``CPU``, ``Lock:tuple``, ``IO:WalSync``...;
    ``client`` when it waits for its writer (idle, or idle in a transaction)."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(SAMPLE_S):
            rows = conn.execute(
                "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()"
            ).fetchall()
            for state, kind, event in rows:
                if state != "active":
                    counts["client"] += 1
                elif kind is None:
                    counts["CPU"] += 1
                else:
                    counts[f"{kind}:{event}"] += 1


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def run_writers(url: str, writers: int, seconds: float, usage: str) -> dict[str, Any]:
    """K = ``writers`` processes upserting for ``seconds``; rows/s, CPU per row, WAL per row, waits."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs, usage_daily")
        conn.execute("CHECKPOINT")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(writers + 1)
    out = context.Queue()
    processes = [
        context.Process(
            target=_writer_process,
            args=(i, url, seconds, f"bench-w{i}" if usage == "per-writer" else None, barrier, out),
            name=f"pg-writer-{i}",
        )
        for i in range(writers)
    ]
    for process in processes:
        process.start()
    waits: Counter[str] = Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_waits, args=(url, stop, waits), name="pg-waits")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            barrier.wait(timeout=120)  # every writer connected and warmed up
            cpu_before, wal_before = _cpu_snapshot(conn), _wal_lsn(conn)
            sampler.start()
            barrier.wait(timeout=60)  # go
            begin = time.perf_counter()
            barrier.wait(timeout=seconds + 120)  # every writer done
            wall = time.perf_counter() - begin
            cpu_after, wal_after = _cpu_snapshot(conn), _wal_lsn(conn)
            stop.set()
            sampler.join()
            row = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (wal_after, wal_before)).fetchone()
            wal_bytes = float(row[0]) if row else float("nan")
            barrier.wait(timeout=60)  # release them
            results = [WriterResult(**out.get(timeout=60)) for _ in processes]
            row = conn.execute("SELECT count(*) FROM jobs").fetchone()
            stored = int(row[0]) if row else -1
    except BaseException:
        barrier.abort()
        stop.set()
        errors = [r.get("error") for r in _drain(out)]
        raise WriterBenchError(f"the writers failed: {errors}") from None
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
    failed = [r.error for r in results if r.error]
    if failed:
        raise WriterBenchError(f"writers failed: {failed}")
    rows = sum(r.rows for r in results)
    if stored != rows + writers * BATCH:  # the counted rows and each writer's warm-up batch
        raise WriterBenchError(f"{stored} rows in jobs, {rows + writers * BATCH} written")
    server_cpu = _cpu_delta(cpu_before, cpu_after)
    latencies = [ms for r in results for ms in r.batch_ms]
    sampled = sum(waits.values()) or 1
    return {
        "writers": writers,
        "usage": usage,
        "rows": rows,
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall),
        "per_writer_rows_per_s": [round(r.rows / r.seconds) for r in sorted(results, key=lambda r: r.index)],
        "batch_ms_median": round(statistics.median(latencies), 2),
        "batch_ms_p95": round(_percentile(latencies, 0.95), 2),
        "postgres_cpu_s": round(server_cpu, 2),
        "postgres_cores_busy": round(server_cpu / wall, 2),
        "postgres_cpu_us_per_row": round(server_cpu / rows * 1e6, 1),
        "writers_cpu_cores_each": round(statistics.mean(r.cpu_s / r.seconds for r in results), 2),
        "wal_bytes_per_row": round(wal_bytes / rows),
        "backend_states": {name: round(count / sampled, 3) for name, count in waits.most_common(8)},
    }


def _drain(out: Any) -> list[dict[str, Any]]:
    items = []
    while True:
        try:
            items.append(out.get(timeout=1))
        except Exception:
            return items


def server_settings(url: str) -> dict[str, str]:
    """The settings that decide a commit's cost, as the server runs with them."""
    with psycopg.connect(url, autocommit=True) as conn:
        shown = {}
        for name in SHOWN_SETTINGS:
            row = conn.execute(f"SHOW {name}").fetchone()
            shown[name] = str(row[0]) if row else ""
        return shown


def prepare(url: str) -> None:
    """Today's and tomorrow's partitions exist before the writers start (the sweeper makes them ahead)."""

    async def make() -> None:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            today = dt.datetime.now(dt.UTC).date()
            await create_partitions(conn, [today, today + dt.timedelta(days=1)])
        finally:
            await conn.close()

    asyncio.run(make())


def parse_counts(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; each at least 1."""
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"writer counts must be positive integers, got {text!r}")
    return counts


def parse_usage(text: str) -> list[str]:
    """``"shared,per-writer"`` -> the usage modes, each one of :data:`USAGE_MODES`."""
    modes = [part.strip() for part in text.split(",") if part.strip()]
    if not modes or any(mode not in USAGE_MODES for mode in modes):
        raise argparse.ArgumentTypeError(f"usage modes are {', '.join(USAGE_MODES)}; got {text!r}")
    return modes


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bench.pg_writers``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--writers", type=parse_counts, default=[1, 2, 4, 8, 16], help="writer counts K, comma-separated"
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="how long each K's writers write")
    parser.add_argument(
        "--usage", type=parse_usage, default=["shared"], help="usage_daily rows: shared, per-writer (comma-separated)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/pg-writers.json"), help="JSON results")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every K of ``--writers`` for every ``--usage`` mode, print a table, write JSON."""
    args = build_parser().parse_args(argv)
    runs = []
    with benchmark_servers() as urls:
        url = libpq_url(urls.database_url)
        settings = server_settings(url)
        prepare(url)
        print("PostgreSQL: " + ", ".join(f"{k}={v}" for k, v in settings.items()), flush=True)
        print("usage       K   rows/s  per writer  batch ms p50/p95  pg cores  pg us/row  WAL B/row  top waits")
        for usage in args.usage:
            for writers in args.writers:
                run = run_writers(url, writers, args.seconds, usage)
                runs.append(run)
                top = ", ".join(f"{k} {v:.2f}" for k, v in list(run["backend_states"].items())[:3])
                each = statistics.mean(run["per_writer_rows_per_s"])
                print(
                    f"{usage:10} {writers:2} {run['rows_per_s']:8,} {each:10,.0f}"
                    f"  {run['batch_ms_median']:7.1f}/{run['batch_ms_p95']:<7.1f}  {run['postgres_cores_busy']:8.2f}"
                    f"  {run['postgres_cpu_us_per_row']:9.1f}  {run['wal_bytes_per_row']:9}  {top}",
                    flush=True,
                )
    result: dict[str, Any] = {
        "batch": BATCH,
        "seconds_each": args.seconds,
        "postgres_settings": settings,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30),
        },
        "command": "python -m bench.pg_writers --writers "
        + ",".join(map(str, args.writers))
        + f" --seconds {args.seconds:g} --usage "
        + ",".join(args.usage),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
