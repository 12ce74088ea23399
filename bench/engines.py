"""Issue 15 measured with real ``dragoman worker`` processes: several engines per GPU, the two
lanes, and how fast a killed worker's jobs run again.

On the lent H100 (dummy weights with real shapes), from the repository root:

    export PYTHONPATH=/root/site:$PWD
    python -m bench.engines sweep --model .gpu/models/smollm2-135m-shape --engines 1,auto --jobs 3000 --bare \\
        --out $OUT/engines-sweep-135m.json
    python -m bench.engines mixed --model .gpu/models/llama3-8b-shape --scheduling-policy priority --lanes on \\
        --bulk-alone --out $OUT/engines-mixed-8b-priority-on.json
    python -m bench.engines mixed --model .gpu/models/llama3-8b-shape --scheduling-policy fcfs --lanes off \\
        --out $OUT/engines-mixed-8b-fcfs-off.json                    # the baseline: one lane, fcfs
    python -m bench.engines mixed --model .gpu/models/smollm2-135m-shape --engines auto --bulk-jobs 20000 \\
        --interactive-jobs 40 --bulk-alone --out $OUT/engines-mixed-135m-auto.json
    python -m bench.engines mixed --model .gpu/models/smollm2-135m-shape --engines auto --interactive-engine \\
        --bulk-jobs 20000 --interactive-jobs 40 --bulk-alone --out $OUT/engines-mixed-135m-auto-interactive.json
    python -m bench.engines orphans --model .gpu/models/smollm2-135m-shape --jobs 4000 \\
        --out $OUT/engines-orphans-135m.json

A CPU smoke run (the default model, real weights, no GPU):

    M=$(python -m cli.main model path)
    CPU="--load-format auto --enforce-eager --max-num-seqs 8 --max-model-len 768 --warm-up-jobs 8"
    python -m bench.engines sweep --model $M $CPU --engines 1,auto --jobs 16 --bare
    python -m bench.engines mixed --model $M $CPU --bulk-jobs 40 --interactive-jobs 3 --interactive-rate 0.5 \
        --scheduling-policy priority --bulk-alone --bulk-alone-s 10
    python -m bench.engines orphans --model $M $CPU --jobs 40

(``--max-model-len 768`` bounds the worker's retry of a job that hit its output budget, which
real weights on this workload's word salad often do; ``length_retries`` counts those retries.)

Every measured point runs against the embedded Redis and PostgreSQL (``bench.servers``) under a
key prefix of its own, with workers started as ``python -m cli.main worker`` subprocesses
(``DRAGOMAN_*`` variables in their environment, each worker's log in ``--logs``). The workload
is ``bench.workload``'s (inputs of 10-200 tokens, output budget = input + 16, ``ignore_eos`` for
dummy weights). The JSON report is rewritten after every point, so a timeout loses only the
point it cut short.

- ``sweep``: per ``--engines`` value, the worker's start time (until every engine's heartbeat is
  in Redis), a warm-up of ``--warm-up-jobs`` (not measured), then ``--jobs`` bulk jobs submitted at once: jobs/s
  and output tokens/s from the first submit to the last row seen, latency p50/p95/p99 (row
  ``finished_at - created_at``; ``run_latency_s``: ``finished_at - started_at``). ``--bare``:
  K engines fed in-process (``bench.gpu``'s ``start_engine``/``run_bare``), one process each with
  1/K of the memory and 1/K of the same requests, released together once all are built. Ratios:
  each count / one engine, and dragoman with K engines / bare K engines.
- ``mixed``: ``--engines`` per GPU (default 1; ``auto`` as the worker picks it), with
  ``--interactive-engine`` one more engine for interactive jobs beside them (the others then read
  with the lane policy ``bulk``); every engine is up (its heartbeat) and both lanes warmed up
  before anything is measured, and every phase goes through the same worker. A: interactive jobs
  one every ``1/rate`` s on an idle worker, each one's latency from submit to its row being seen
  (polled every 20 ms). B: ``--bulk-jobs`` bulk
  jobs (``--lanes off``: submitted as interactive, one lane), then the same interactive probe
  while they drain: its latency, and bulk jobs/s during the probe. C (``--bulk-alone``): bulk
  jobs/s for ``--bulk-alone-s`` more seconds with no interactive jobs. A probe job not done
  after ``--probe-timeout`` counts as that many seconds (``censored``).
- ``orphans``: two workers (one engine each) on one queue; once ``--kill-at`` of the jobs have
  rows, one worker's process tree is killed (SIGKILL). The entries it held (XPENDING on both
  lanes, before and just after the kill) are followed until each is running on the other worker
  or finished: that time against the heartbeat TTL. Then every job must have exactly one row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import psutil  # type: ignore[import-untyped]  # comes with vLLM; no stubs installed
import psycopg
import redis
from redis.exceptions import ResponseError

from bench.gpu import OUTPUT_RATIO, Outcome, _percentiles, build_requests, run_bare, start_engine, summarise
from bench.servers import benchmark_servers
from bench.workload import texts_of_lengths, token_lengths
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url
from worker.reclaim import HEARTBEAT_TTL_S

TEXT_SEED, WARM_SEED, PROBE_SEED = 1, 4, 5  # the same seeds as bench.gpu's texts and warm-up
FINAL_STATUSES = ("succeeded", "failed", "cancelled")
GROUP_LINE = re.compile(r"running (\d+) engines \(")  # an engine group's count over all its GPUs
RETRY_LINE = "stopped at its output budget"  # worker.translator's log line when it retries a job

COUNT_SQL = "SELECT count(*) FROM jobs WHERE id = ANY(%s::uuid[])"
DONE_SQL = "SELECT id::text FROM jobs WHERE id = ANY(%s::uuid[])"
ROWS_SQL = """
SELECT extract(epoch FROM created_at), extract(epoch FROM started_at), extract(epoch FROM finished_at),
       coalesce(prompt_tokens, 0), coalesce(output_tokens, 0), status
FROM jobs WHERE id = ANY(%s::uuid[])
"""
DUPLICATES_SQL = """
SELECT count(*) FROM (SELECT id FROM jobs WHERE id = ANY(%s::uuid[]) GROUP BY id HAVING count(*) > 1) AS d
"""

_T0 = time.perf_counter()


# Output --------------------------------------------------------------------------------------


def say(message: str) -> None:
    """One progress line: wall-clock time, seconds since this script started, the message."""
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - _T0:7.1f}s] {message}", flush=True)


class Report:
    """The JSON report, rewritten whole after every change (so a timeout loses nothing measured)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = header
        self.save()

    def add(self, key: str, value: Any) -> None:
        """Set ``key``, print it as one JSON line and save."""
        self.data[key] = value
        say(f"{key}: {json.dumps(value)}")
        self.save()

    def save(self) -> None:
        """Write the report (to a temporary file first, then renamed over it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.data, indent=2) + "\n")
        temporary.replace(self.path)


@dataclass
class Bench:
    """What every subcommand shares: the arguments, the services, the report, the workload's tokenizer."""

    args: argparse.Namespace
    urls: ServiceUrls
    report: Report
    logs: Path
    tokenizer: Any = None

    def texts(self, count: int, seed: int) -> list[str]:
        """``count`` texts of the workload's lengths (the same for a given count and seed)."""
        return workload_texts(self.tokenizer, count, self.args.workload, seed)


def workload_texts(tokenizer: Any, count: int, kind: str, seed: int) -> list[str]:
    """``bench.workload``'s texts: lengths from its fixed seed, words from ``seed``."""
    return texts_of_lengths(tokenizer, token_lengths(count, kind), seed=seed)


def load_tokenizer(model: Path) -> Any:
    """The model's tokenizer, without an engine (for the workload's texts)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model))


def ignore_eos(args: argparse.Namespace) -> bool:
    """``--ignore-eos``, or by default whether the weights are dummy ones."""
    return bool(args.load_format == "dummy" if args.ignore_eos is None else args.ignore_eos)


# Worker processes ----------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """A ``dragoman worker`` subprocess (its own session) and where its log goes."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    consumer: str | None = None
    started: float = field(default_factory=time.perf_counter)

    def log_text(self) -> str:
        """Everything the worker has logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def length_retries(self) -> int:
        """Jobs the worker ran again with the whole context after they hit their output budget (so far)."""
        return self.log_text().count(RETRY_LINE)

    def check_alive(self) -> None:
        """Raise if the worker has exited, with the end of its log."""
        code = self.process.poll()
        if code is not None:
            tail = "\n".join(self.log_text().splitlines()[-15:])
            raise RuntimeError(f"worker {self.name} exited with {code} (log {self.log_path}):\n{tail}")


def split_point(label: str) -> tuple[str, str | None]:
    """A sweep point ``ENGINES[@GPUS]`` (``1``, ``auto``, ``1@0``, ``auto@all``) as (engines, gpus or None)."""
    engines, _, gpus = label.partition("@")
    return engines, gpus or None


def worker_argv(args: argparse.Namespace, engines: str, memory: float, gpus: str | None = None) -> list[str]:
    """The ``dragoman worker`` command line for ``engines`` (a count or ``auto``) per GPU with ``memory``
    of each, on ``gpus`` (``--gpus``; None: the GPUs left as they are); ``mixed --interactive-engine`` adds
    the interactive engine."""
    argv = [
        *(sys.executable, "-m", "cli.main", "worker", "--model", str(args.model)),
        *("--load-format", args.load_format, "--engines", engines),
        *("--gpu-memory-utilization", str(memory), "--max-num-seqs", str(args.max_num_seqs)),
        *("--max-model-len", str(args.max_model_len), "--scheduling-policy", args.scheduling_policy),
        *("--log-level", "INFO", "--enforce-eager" if args.enforce_eager else "--no-enforce-eager"),
        *(("--gpus", gpus) if gpus else ()),
    ]
    if getattr(args, "interactive_engine", False):
        argv.append("--interactive-engine")
        if args.interactive_max_seqs:
            argv += ["--interactive-max-seqs", str(args.interactive_max_seqs)]
    return [*argv, "--ignore-eos"] if ignore_eos(args) else argv


def worker_env(urls: ServiceUrls, prefix: str, consumer: str | None) -> dict[str, str]:
    """The worker's environment: this benchmark's services and key prefix, metrics on any free port."""
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": urls.redis_url,
        "DRAGOMAN_DATABASE_URL": urls.database_url,
        "DRAGOMAN_KEY_PREFIX": prefix,
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_OUTPUT_TOKENS_RATIO": str(OUTPUT_RATIO),
        "DRAGOMAN_SHUTDOWN_GRACE_SECONDS": "10",
    }
    env.pop("DRAGOMAN_CONSUMER_NAME", None)
    return env | ({"DRAGOMAN_CONSUMER_NAME": consumer} if consumer else {})


def start_worker(
    bench: Bench,
    prefix: str,
    name: str,
    engines: str,
    memory: float,
    consumer: str | None = None,
    gpus: str | None = None,
) -> WorkerProcess:
    """Start one ``dragoman worker`` process (``engines`` > 1 or auto: a supervisor of children)."""
    log_path = bench.logs / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            worker_argv(bench.args, engines, memory, gpus),
            env=worker_env(bench.urls, prefix, consumer),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    on = f", --gpus {gpus}" if gpus else ""
    say(f"started worker {name} (pid {process.pid}, --engines {engines}{on}, memory {memory}, log {log_path})")
    return WorkerProcess(name, process, log_path, consumer)


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and every descendant still running (engine cores, a supervisor's children)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(worker: WorkerProcess, tree: Sequence[psutil.Process] = ()) -> None:
    """SIGKILL the worker's process group and every process of its tree (``tree``: found earlier)."""
    victims = [*tree, *process_tree(worker.process.pid)]
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(worker.process.pid, signal.SIGKILL)
    for process in victims:
        with suppress(psutil.NoSuchProcess):
            process.kill()
    worker.process.wait()


def stop_worker(worker: WorkerProcess, timeout: float = 45.0) -> None:
    """SIGTERM (a supervisor passes it on), wait, then kill whatever is left of the tree."""
    tree = process_tree(worker.process.pid)
    if worker.process.poll() is None:
        worker.process.send_signal(signal.SIGTERM)
        try:
            worker.process.wait(timeout)
        except subprocess.TimeoutExpired:
            say(f"worker {worker.name} still running {timeout:.0f}s after SIGTERM: killing it")
    kill_tree(worker, tree)
    say(f"stopped worker {worker.name} (exit {worker.process.returncode})")


@contextmanager
def running_workers(workers: list[WorkerProcess]) -> Iterator[list[WorkerProcess]]:
    """Stop every worker of ``workers`` (as it is on exit) however the block ends."""
    try:
        yield workers
    finally:
        for worker in workers:
            stop_worker(worker)


def engine_count(
    worker: WorkerProcess, engines: str, timeout: float, gpus: str | None = None, interactive: bool = False
) -> int:
    """The engines the worker runs over all its GPUs: ``engines``, or for ``auto``, ``--gpus`` or an
    interactive engine the count its engine group logs."""
    if engines != "auto" and gpus is None and not interactive:
        return int(engines)
    deadline = time.perf_counter() + timeout
    while not (match := GROUP_LINE.search(worker.log_text())):
        worker.check_alive()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"worker {worker.name} did not log its engine count in {timeout:.0f}s")
        time.sleep(0.2)
    return int(match.group(1))


def wait_heartbeats(jobs: Jobs, workers: Sequence[WorkerProcess], count: int, timeout: float) -> float:
    """Wait until ``count`` heartbeats are in Redis (every engine is up); seconds since the first start."""
    deadline, note = time.perf_counter() + timeout, time.perf_counter() + 30
    while (beating := jobs.heartbeats()) < count:
        for worker in workers:
            worker.check_alive()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{beating} of {count} engines up after {timeout:.0f}s")
        if time.perf_counter() > note:
            say(f"waiting for engines: {beating}/{count} up")
            note += 30
        time.sleep(0.2)
    return round(time.perf_counter() - min(w.started for w in workers), 1)


# Jobs: submitted through the client, followed in Redis and in the jobs table -----------------


class Jobs:
    """One key prefix: the client that submits, its Redis names, and the ``jobs`` rows by id."""

    def __init__(self, urls: ServiceUrls, prefix: str) -> None:
        settings = Settings(
            redis_url=urls.redis_url, database_url=urls.database_url, key_prefix=prefix, metrics_enabled=False
        )
        self.client = Client(settings)
        self.redis = redis.Redis.from_url(urls.redis_url, decode_responses=True)
        self.keys = self.client.keys
        self._db = psycopg.connect(libpq_url(urls.database_url), autocommit=True)  # the benchmark's own reads

    def close(self) -> None:
        """Close the connections."""
        self.client.close()
        self.redis.close()
        self._db.close()

    def submit(self, texts: Sequence[str], lanes: Sequence[str]) -> list[str]:
        """Submit every text at once (``submit_many``), each in its lane; the ids."""
        items = [
            {"text": text, "source_lang": "en", "target_lang": "fr", "lane": lane}
            for text, lane in zip(texts, lanes, strict=True)
        ]
        return self.client.submit_many(items)

    def submit_one(self, text: str, lane: str) -> str:
        """Submit one job; its id."""
        return self.client.submit(text, "en", "fr", lane=lane)

    def count(self, ids: Sequence[str]) -> int:
        """How many of ``ids`` have a row."""
        return self._scalar(COUNT_SQL, ids)

    def done(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that have a row."""
        return {row[0] for row in self._db.execute(DONE_SQL, (list(ids),)).fetchall()}

    def rows(self, ids: Sequence[str]) -> list[tuple[float, float, float, int, int, str]]:
        """(created, started, finished, prompt tokens, output tokens, status) of each row."""
        rows = self._db.execute(ROWS_SQL, (list(ids),)).fetchall()
        return [(float(c), float(s or f), float(f), int(p), int(o), str(st)) for c, s, f, p, o, st in rows]

    def duplicate_rows(self, ids: Sequence[str]) -> int:
        """Ids of ``ids`` with more than one row (the primary key should make it 0)."""
        return self._scalar(DUPLICATES_SQL, ids)

    def _scalar(self, query: str, ids: Sequence[str]) -> int:
        """The one number ``query`` counts over ``ids``."""
        row = self._db.execute(query, (list(ids),)).fetchone()
        return 0 if row is None else int(row[0])

    def events(self) -> int:
        """Entries in this prefix's events stream: one per job finished (more if one finished twice)."""
        return int(self.redis.xlen(self.keys.events_stream))

    def heartbeats(self) -> int:
        """Live workers' heartbeat keys under this prefix (one per engine)."""
        return sum(1 for _ in self.redis.scan_iter(match=self.keys.worker_pattern, count=1000))


def wait_rows(
    jobs: Jobs, ids: Sequence[str], since_events: int, workers: Sequence[WorkerProcess], timeout: float
) -> float:
    """Block until every id has a row; the ``perf_counter`` time it was seen.

    Polls the events stream's length every 20 ms (cheap), the table only once it says all are done.
    """
    start = time.perf_counter()
    deadline, note = start + timeout, start + 10
    while True:
        finished = jobs.events() - since_events
        if finished >= len(ids) and jobs.count(ids) >= len(ids):
            return time.perf_counter()
        for worker in workers:
            worker.check_alive()
        now = time.perf_counter()
        if now > deadline:
            raise TimeoutError(f"{jobs.count(ids)} of {len(ids)} jobs done after {timeout:.0f}s")
        if now > note:
            say(f"  {finished}/{len(ids)} done, {finished / (now - start):.1f} jobs/s")
            note += 10
        time.sleep(0.02)


def run_batch(
    jobs: Jobs, texts: Sequence[str], lane: str, workers: Sequence[WorkerProcess], timeout: float
) -> tuple[list[str], float, float]:
    """Submit ``texts`` at once and wait for all rows: the ids, seconds to submit, seconds to the last row."""
    since = jobs.events()
    start = time.perf_counter()
    ids = jobs.submit(texts, [lane] * len(texts))
    submitted = time.perf_counter() - start
    return ids, round(submitted, 3), wait_rows(jobs, ids, since, workers, timeout) - start


def row_summary(jobs: Jobs, ids: Sequence[str], elapsed: float) -> dict[str, Any]:
    """``bench.gpu.summarise`` of the rows (latency: created to finished), plus statuses and run latency."""
    rows = jobs.rows(ids)
    outcomes = [Outcome(finished - created, output) for created, _, finished, _, output, _ in rows]
    summary = summarise(elapsed, outcomes, [prompt for _, _, _, prompt, _, _ in rows])
    summary["run_latency_s"] = _percentiles([finished - started for _, started, finished, _, _, _ in rows])
    summary["statuses"] = dict(Counter(status for *_, status in rows))
    return summary


def new_prefix(kind: str) -> str:
    """A key prefix no other point uses."""
    return f"bench-{kind}-{uuid.uuid4().hex[:8]}"


# sweep -----------------------------------------------------------------------------------------


def measure_dragoman(bench: Bench, label: str, texts: list[str], warm: list[str]) -> dict[str, Any]:
    """One sweep point (``ENGINES[@GPUS]``): start the worker, wait for every engine, warm up, then the
    measured jobs."""
    args, prefix = bench.args, new_prefix("sweep")
    engines, gpus = split_point(label)
    jobs = Jobs(bench.urls, prefix)
    name = f"sweep-engines-{label.replace('@', '-gpus-').replace(',', '_')}"
    worker = start_worker(bench, prefix, name, engines, args.gpu_memory_utilization, gpus=gpus)
    with running_workers([worker]):
        count = engine_count(worker, engines, args.start_timeout, gpus)
        point: dict[str, Any] = {"engines": label, "engine_count": count, "log": str(worker.log_path)}
        point["start_s"] = wait_heartbeats(jobs, [worker], count, args.start_timeout)
        say(f"{count} engine(s) up in {point['start_s']}s; warm-up of {len(warm)} jobs")
        point["warm_up_s"] = round(run_batch(jobs, warm, args.lane, [worker], args.drain_timeout)[2], 2)
        say(f"measuring {len(texts)} jobs ({args.lane})")
        retries = worker.length_retries()
        ids, point["submit_s"], elapsed = run_batch(jobs, texts, args.lane, [worker], args.drain_timeout)
        point |= row_summary(jobs, ids, elapsed) | {"length_retries": worker.length_retries() - retries}
        if point["length_retries"] and ignore_eos(args):
            say(f"WARNING: {point['length_retries']} jobs were run again after their output budget (ignore_eos)")
    jobs.close()
    return point


def bare_argv(args: argparse.Namespace, index: int, count: int, barrier: Path) -> list[str]:
    """The ``bare-one`` command line of engine ``index`` of ``count``."""
    argv = [
        *(sys.executable, "-m", "bench.engines", "bare-one", "--model", str(args.model)),
        *("--load-format", args.load_format, "--max-num-seqs", str(args.max_num_seqs)),
        *("--max-model-len", str(args.max_model_len), "--scheduling-policy", args.scheduling_policy),
        *("--gpu-memory-utilization", str(round(args.gpu_memory_utilization / count, 4))),
        *("--share", f"{index}/{count}", "--jobs", str(args.jobs), "--workload", args.workload),
        *("--warm-up-jobs", str(args.warm_up_jobs)),
        *("--barrier", str(barrier), "--out", str(barrier / f"result-{index}.json")),
        "--enforce-eager" if args.enforce_eager else "--no-enforce-eager",
        "--ignore-eos" if ignore_eos(args) else "--no-ignore-eos",
    ]
    return argv


def start_bare(bench: Bench, count: int, barrier: Path) -> list[WorkerProcess]:
    """Start ``count`` bare-engine processes (each its own session and log), one after the other.

    Each starts once the one before it is built and warmed up, as ``dragoman worker --engines``
    starts its engines: started together, vLLM engines on one GPU count each other's memory while
    sizing their KV caches (on the H100 four 135M engines got 13.2, 0.7, 0.5 and 1.1 GiB, or failed).
    """
    started: list[WorkerProcess] = []
    for index in range(count):
        if started:
            try:
                wait_files([barrier / f"ready-{index - 1}"], started[-1:], bench.args.start_timeout)
            except BaseException:
                for earlier in started:
                    stop_worker(earlier)
                raise
        log_path = bench.logs / f"bare-{index}-of-{count}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                bare_argv(bench.args, index, count, barrier),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(WorkerProcess(f"bare-{index}", process, log_path))
    say(f"started {count} bare engine process(es), logs in {bench.logs}")
    return started


def wait_files(paths: Sequence[Path], processes: Sequence[WorkerProcess], timeout: float) -> None:
    """Wait until every path exists; raise if a process dies (before writing its file) or on timeout."""
    deadline = time.perf_counter() + timeout
    while not all(path.exists() for path in paths):
        for process, path in zip(processes, paths, strict=True):
            if not path.exists():
                process.check_alive()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{sum(p.exists() for p in paths)} of {len(paths)} ready after {timeout:.0f}s")
        time.sleep(0.05)


def measure_bare(bench: Bench, count: int) -> dict[str, Any]:
    """``count`` bare engines on the same requests, split evenly, released at once once all are built."""
    barrier = Path(tempfile.mkdtemp(prefix="dragoman-bare-"))
    start = time.perf_counter()
    processes = start_bare(bench, count, barrier)
    with running_workers(processes):
        wait_files([barrier / f"ready-{i}" for i in range(count)], processes, bench.args.start_timeout)
        point: dict[str, Any] = {"engines": count, "start_s": round(time.perf_counter() - start, 1)}
        released = time.time()
        (barrier / "go").write_text(repr(released))
        say(f"{count} bare engine(s) built in {point['start_s']}s; released")
        results = [barrier / f"result-{i}.json" for i in range(count)]
        wait_files(results, processes, bench.args.drain_timeout)
    shares = [json.loads(path.read_text()) for path in results]
    shutil.rmtree(barrier, ignore_errors=True)
    outcomes = [Outcome(latency, output) for share in shares for latency, output, _ in share["outcomes"]]
    inputs = [tokens for share in shares for _, _, tokens in share["outcomes"]]
    point["engine_start_s"] = [share["engine_start_s"] for share in shares]
    return point | summarise(max(share["finished"] for share in shares) - released, outcomes, inputs)


def sweep_ratios(points: dict[str, Any], bare: dict[str, Any] | None) -> dict[str, float]:
    """jobs/s of each point over the first point's (one engine: ``1`` or ``1@0``), and of dragoman with
    K engines over bare K engines."""
    ratios: dict[str, float] = {}
    first = next(iter(points), None)
    one = points[first].get("jobs_per_s") if first else None
    for label, point in points.items():
        if label != first and one and "jobs_per_s" in point:
            ratios[f"engines_{label}_vs_{first}"] = round(point["jobs_per_s"] / one, 3)
    if bare and "jobs_per_s" in bare:
        ordered = sorted(points.items(), key=lambda item: item[0] != "auto")  # auto's point first
        match = next((p for _, p in ordered if p.get("engine_count") == bare["engines"] and "jobs_per_s" in p), None)
        if match:
            ratios[f"dragoman_{match['engines']}_vs_bare_{bare['engines']}"] = round(
                match["jobs_per_s"] / bare["jobs_per_s"], 3
            )
    return ratios


def run_sweep(bench: Bench) -> None:
    """The ``sweep`` subcommand."""
    args = bench.args
    texts, warm = bench.texts(args.jobs, TEXT_SEED), bench.texts(args.warm_up_jobs, WARM_SEED)
    points: dict[str, Any] = {}
    for engines in [e.strip() for e in args.engines.split(",") if e.strip()]:
        try:
            points[engines] = measure_dragoman(bench, engines, texts, warm)
        except (RuntimeError, TimeoutError) as exc:
            points[engines] = {"engines": engines, "error": str(exc)}
        bench.report.add("dragoman", points)
        bench.report.add("ratios", sweep_ratios(points, None))
    if not args.bare:
        return
    counts = [p["engine_count"] for p in points.values() if "engine_count" in p]
    k = args.bare_engines or points.get("auto", {}).get("engine_count") or max(counts, default=1)
    try:
        bare = measure_bare(bench, k)
    except (RuntimeError, TimeoutError) as exc:
        bare = {"engines": k, "error": str(exc)}
    bench.report.add("bare", bare)
    bench.report.add("ratios", sweep_ratios(points, bare))


# bare-one (a child process of sweep --bare) ----------------------------------------------------


def run_bare_one(args: argparse.Namespace) -> None:
    """One bare engine: build it, warm it up, say ready, wait for the go, run its share, write the result."""
    from worker.profiles import FewShotProfile, choose_profile
    from worker.runtime import freeze_startup_heap, run_event_loop

    index, count = (int(part) for part in args.share.split("/"))
    tokenizer = load_tokenizer(args.model)
    texts = workload_texts(tokenizer, args.jobs, args.workload, TEXT_SEED)[index::count]
    warm = workload_texts(tokenizer, args.warm_up_jobs, args.workload, WARM_SEED)[index::count]
    engine_args = [
        *(f"--max-num-seqs={args.max_num_seqs}", f"--max-model-len={args.max_model_len}"),
        *(f"--load-format={args.load_format}", f"--gpu-memory-utilization={args.gpu_memory_utilization}"),
        "--enforce-eager" if args.enforce_eager else "--no-enforce-eager",
        f"--scheduling-policy={args.scheduling_policy}",
    ]
    engine, started_s = start_engine(args.model, (engine_args, ignore_eos(args)))
    try:
        # The worker's own profile (and stop tokens), so both feeds generate the same outputs.
        profile = cast(FewShotProfile, choose_profile(None, args.model, engine.tokenizer))
        requests = build_requests(engine, texts, Settings(), profile)
        warm_up = build_requests(engine, warm, Settings(), profile)
        freeze_startup_heap()
        barrier, in_flight = args.barrier, 2 * args.max_num_seqs

        async def feed() -> tuple[float, list[Outcome]]:
            await run_bare(engine, warm_up, in_flight)
            (barrier / f"ready-{index}").touch()
            while not (barrier / "go").exists():
                await asyncio.sleep(0.005)
            return await run_bare(engine, requests, in_flight)

        _, outcomes = run_event_loop(feed())
        finished = time.time()
    finally:
        engine.shutdown()
    result = {
        "engine_start_s": started_s,
        "finished": finished,
        "outcomes": [[o.latency_s, o.output_tokens, r.input_tokens] for o, r in zip(outcomes, requests, strict=True)],
    }
    args.out.write_text(json.dumps(result))


# mixed -----------------------------------------------------------------------------------------


@dataclass
class Probe:
    """Interactive jobs submitted one at a time: their ids and latencies (submit to row seen)."""

    ids: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    censored: int = 0
    seconds: float = 0.0

    def summary(self, jobs: Jobs) -> dict[str, Any]:
        """Latency percentiles (seen, and from the rows: created to finished), timed-out count."""
        rows = jobs.rows(self.ids)
        return {
            "jobs": len(self.ids),
            "seconds": round(self.seconds, 2),
            "latency_s": _percentiles(self.latencies),
            "row_latency_s": _percentiles([finished - created for created, _, finished, *_ in rows]),
            "censored": self.censored,
        }


def probe(jobs: Jobs, texts: Sequence[str], rate: float, timeout: float, workers: Sequence[WorkerProcess]) -> Probe:
    """Submit one interactive job every ``1/rate`` s; poll the open ones' rows every 20 ms.

    A job still open ``timeout`` s after its submit counts as ``timeout`` s (and as censored).
    """
    result, open_jobs = Probe(), dict[str, float]()
    start = time.perf_counter()
    while len(result.ids) < len(texts) or open_jobs:
        now = time.perf_counter()
        if len(result.ids) < len(texts) and now >= start + len(result.ids) / rate:
            job_id = jobs.submit_one(texts[len(result.ids)], "interactive")
            result.ids.append(job_id)
            open_jobs[job_id] = now
        for job_id in jobs.done(list(open_jobs)) if open_jobs else ():
            result.latencies.append(time.perf_counter() - open_jobs.pop(job_id))
        for job_id in [j for j, submitted in open_jobs.items() if now - submitted > timeout]:
            del open_jobs[job_id]
            result.latencies.append(timeout)
            result.censored += 1
        for worker in workers:
            worker.check_alive()
        time.sleep(0.02)
    result.seconds = time.perf_counter() - start
    return result


def bulk_window(jobs: Jobs, bulk_ids: Sequence[str], during: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
    """Bulk jobs/s while ``during()`` runs, and what it returned (``drained``: the backlog ran out)."""
    before, start = jobs.count(bulk_ids), time.perf_counter()
    value = during()
    after, seconds = jobs.count(bulk_ids), time.perf_counter() - start
    window = {
        "bulk_done": after - before,
        "seconds": round(seconds, 2),
        "bulk_jobs_per_s": round((after - before) / seconds, 2),
        "drained": after == len(bulk_ids),
    }
    return window, value


def mixed_ratios(idle: dict[str, Any], loaded: dict[str, Any], alone: dict[str, Any] | None) -> dict[str, float]:
    """Interactive p95 under load over idle p95; bulk jobs/s beside the probe over bulk alone."""
    ratios: dict[str, float] = {}
    idle_p95 = idle["latency_s"].get("p95") or idle["latency_s"]["p50"]
    loaded_p95 = loaded["latency_s"].get("p95") or loaded["latency_s"]["p50"]
    if idle_p95:
        ratios["interactive_p95_loaded_vs_idle"] = round(loaded_p95 / idle_p95, 2)
    if alone and alone["bulk_jobs_per_s"]:
        ratios["bulk_mixed_vs_alone"] = round(loaded["bulk_jobs_per_s"] / alone["bulk_jobs_per_s"], 3)
    return ratios


def run_mixed(bench: Bench) -> None:
    """The ``mixed`` subcommand: idle latency, latency beside a bulk backlog, bulk throughput."""
    args, prefix = bench.args, new_prefix("mixed")
    bulk_lane = "bulk" if args.lanes == "on" else "interactive"
    setup = {
        "scheduling_policy": args.scheduling_policy,
        "lanes": args.lanes,
        "engines": args.engines,
        "interactive_engine": args.interactive_engine,
    }
    jobs = Jobs(bench.urls, prefix)
    name = f"mixed-{args.scheduling_policy}-lanes-{args.lanes}-engines-{args.engines}"
    name += "-interactive" if args.interactive_engine else ""
    worker = start_worker(bench, prefix, name, args.engines, args.gpu_memory_utilization)
    with running_workers([worker]):
        count = engine_count(worker, args.engines, args.start_timeout, interactive=args.interactive_engine)
        bench.report.add("setup", setup | {"engine_count": count})
        bench.report.add("start_s", wait_heartbeats(jobs, [worker], count, args.start_timeout))
        for lane in ("interactive", "bulk"):  # the interactive engine, and the others
            run_batch(jobs, bench.texts(args.warm_up_jobs, WARM_SEED), lane, [worker], args.drain_timeout)
        interactive = bench.texts(2 * args.interactive_jobs, PROBE_SEED)
        rate, timeout = args.interactive_rate, args.probe_timeout
        say(f"A: {args.interactive_jobs} interactive jobs, {rate}/s, idle worker")
        idle = probe(jobs, interactive[: args.interactive_jobs], rate, timeout, [worker]).summary(jobs)
        bench.report.add("idle", idle)
        say(f"B: {args.bulk_jobs} bulk jobs ({bulk_lane} lane), then the probe again")
        started = time.perf_counter()
        bulk_ids = jobs.submit(bench.texts(args.bulk_jobs, TEXT_SEED), [bulk_lane] * args.bulk_jobs)
        say(f"submitted in {time.perf_counter() - started:.1f}s; settling {args.settle_s}s")
        time.sleep(args.settle_s)
        window, loaded_probe = bulk_window(
            jobs, bulk_ids, lambda: probe(jobs, interactive[args.interactive_jobs :], rate, timeout, [worker])
        )
        loaded = loaded_probe.summary(jobs) | window
        bench.report.add("loaded", loaded)
        alone = None
        if args.bulk_alone:
            say(f"C: bulk alone for {args.bulk_alone_s}s")
            alone, _ = bulk_window(jobs, bulk_ids, lambda: time.sleep(args.bulk_alone_s))
            bench.report.add("bulk_alone", alone)
        bench.report.add("ratios", mixed_ratios(idle, loaded, alone))
        bench.report.add("length_retries", worker.length_retries())
    jobs.close()


# orphans ---------------------------------------------------------------------------------------


def pending_jobs(jobs: Jobs, consumer: str) -> dict[str, str]:
    """Job id -> stream of every entry pending under ``consumer`` in either lane (XPENDING)."""
    held: dict[str, str] = {}
    for stream in (jobs.keys.jobs_stream, jobs.keys.bulk_jobs_stream):
        try:
            pending = jobs.redis.xpending_range(
                stream, jobs.keys.consumer_group, min="-", max="+", count=1_000_000, consumername=consumer
            )
        except ResponseError:  # no such stream or consumer group: nothing pending there
            continue
        with jobs.redis.pipeline(transaction=False) as pipe:
            for entry in pending:
                pipe.xrange(stream, min=entry["message_id"], max=entry["message_id"], count=1)
            for found in pipe.execute():
                held.update({fields["id"]: stream for _, fields in found if "id" in fields})
    return held


def recovered(jobs: Jobs, held: Sequence[str], victim: str) -> set[str]:
    """Those of ``held`` that are final, or running on a consumer other than ``victim``."""
    with jobs.redis.pipeline(transaction=False) as pipe:
        for job_id in held:
            pipe.hmget(jobs.keys.state(job_id), "status", "consumer")
        states = pipe.execute()
    return {
        job_id
        for job_id, (status, consumer) in zip(held, states, strict=True)
        if status in FINAL_STATUSES or (status == "running" and consumer != victim)
    }


def wait_recovered(jobs: Jobs, held: list[str], victim: str, killed: float, timeout: float) -> dict[str, Any]:
    """Follow the killed worker's jobs until each runs elsewhere or is done: first and last times."""
    first, left = None, set(held)
    while left and time.perf_counter() - killed < timeout:
        left -= recovered(jobs, sorted(left), victim)
        if first is None and len(left) < len(held):
            first = time.perf_counter() - killed
        time.sleep(0.05)
    last = time.perf_counter() - killed
    return {
        "held": len(held),
        "not_recovered": len(left),
        "first_recovered_s": round(first, 2) if first is not None else None,
        "all_recovered_s": round(last, 2) if not left else None,
        "heartbeat_ttl_s": HEARTBEAT_TTL_S,
        "all_recovered_over_ttl": round(last / HEARTBEAT_TTL_S, 2) if not left else None,
    }


def wait_count(jobs: Jobs, ids: Sequence[str], target: int, workers: Sequence[WorkerProcess], timeout: float) -> int:
    """Wait until ``target`` of ``ids`` have rows (polled every 100 ms); how many have."""
    deadline = time.perf_counter() + timeout
    while (done := jobs.count(ids)) < target:
        for worker in workers:
            worker.check_alive()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{done} of {target} jobs done after {timeout:.0f}s")
        time.sleep(0.1)
    return done


def audit(jobs: Jobs, ids: Sequence[str]) -> dict[str, Any]:
    """Lost jobs (no row), duplicate rows, statuses, and jobs that finished twice (two events)."""
    done = jobs.done(ids)
    events: Any = jobs.redis.xrange(jobs.keys.events_stream, count=10 * len(ids) + 1000)
    finishes = Counter(fields.get("id") for _, fields in events)
    return {
        "submitted": len(ids),
        "lost": len(set(ids) - done),
        "duplicate_rows": jobs.duplicate_rows(ids),
        "statuses": dict(Counter(row[-1] for row in jobs.rows(ids))),
        "finished_twice": sum(1 for job_id in ids if finishes[job_id] > 1),
    }


def kill_victim(jobs: Jobs, workers: list[WorkerProcess]) -> tuple[WorkerProcess, dict[str, str], float]:
    """SIGKILL the worker holding more entries; what it held (XPENDING before and after) and when."""
    before = {w.name: pending_jobs(jobs, cast(str, w.consumer)) for w in workers}
    victim = max(workers, key=lambda w: len(before[w.name]))
    kill_tree(victim)
    killed = time.perf_counter()
    held = before[victim.name] | pending_jobs(jobs, cast(str, victim.consumer))
    say(f"killed {victim.name}: it held {len(held)} jobs ({len(before[victim.name])} before the kill)")
    return victim, held, killed


def run_orphans(bench: Bench) -> None:
    """The ``orphans`` subcommand: kill one of two workers mid-run; recovery time, nothing lost, no duplicate."""
    args, prefix = bench.args, new_prefix("orphans")
    jobs = Jobs(bench.urls, prefix)
    memory = args.gpu_memory_utilization
    workers = [start_worker(bench, prefix, f"orphans-{n}", "1", memory, f"{prefix}-{n}") for n in ("a", "b")]
    with running_workers(workers):
        bench.report.add("start_s", wait_heartbeats(jobs, workers, 2, args.start_timeout))
        texts = bench.texts(args.jobs, TEXT_SEED)
        job_lanes = [args.lane if args.lane != "mixed" else ("bulk", "interactive")[i % 2] for i in range(len(texts))]
        ids = jobs.submit(texts, job_lanes)
        done = wait_count(jobs, ids, int(len(ids) * args.kill_at), workers, args.drain_timeout)
        say(f"{done} of {len(ids)} done: killing one worker")
        victim, held, killed = kill_victim(jobs, workers)
        survivors = [w for w in workers if w is not victim]
        lanes = dict(Counter("bulk" if s.endswith(":bulk") else "interactive" for s in held.values()))
        recovery = wait_recovered(jobs, sorted(held), cast(str, victim.consumer), killed, args.recovery_timeout)
        bench.report.add("recovery", {"done_at_kill": done, "held_by_lane": lanes} | recovery)
        try:
            wait_count(jobs, ids, len(ids), survivors, args.drain_timeout)
        except TimeoutError as exc:
            say(f"not every job finished: {exc}")
        bench.report.add("audit", audit(jobs, ids) | {"seconds_after_kill": round(time.perf_counter() - killed, 1)})
    jobs.close()


# Command line ----------------------------------------------------------------------------------


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand has: the model and engine flags, timeouts, output."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", type=Path, required=True, help="model folder")
    common.add_argument("--load-format", default="dummy", help="dummy (GPU shapes, default) or auto (real weights)")
    common.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="generate whole output budgets (default: on with --load-format dummy)",
    )
    common.add_argument(
        "--enforce-eager",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="no CUDA graphs (default off; on for a CPU)",
    )
    common.add_argument("--max-num-seqs", type=int, default=256)
    common.add_argument("--max-model-len", type=int, default=2048)
    common.add_argument("--gpu-memory-utilization", type=float, help="default 0.85 (orphans: 0.4 per worker)")
    common.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default="fcfs")
    common.add_argument("--workload", choices=("realistic", "uniform"), default="realistic")
    common.add_argument("--warm-up-jobs", type=int, default=32, help="jobs run (not measured) once engines are up")
    common.add_argument("--start-timeout", type=float, default=600, help="seconds for engines to start")
    common.add_argument("--drain-timeout", type=float, default=600, help="seconds for a batch of jobs to finish")
    common.add_argument("--out", type=Path, help="JSON report (default bench/out/engines-<command>-<model>.json)")
    common.add_argument("--logs", type=Path, help="worker logs folder (default: beside --out, <out>-logs)")
    return common


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The subcommands and their options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    common = common_options()
    sweep = sub.add_parser("sweep", parents=[common], help="jobs/s per engine count (and bare engines)")
    sweep.add_argument(
        "--engines",
        default="1,auto",
        help="comma-separated points ENGINES[@GPUS], ENGINES a count or auto, GPUS as --gpus takes them "
        "(1@0,1@all: one GPU against all); ratios are over the first point (default 1,auto)",
    )
    sweep.add_argument("--jobs", type=int, default=3000)
    sweep.add_argument("--lane", choices=("bulk", "interactive"), default="bulk")
    sweep.add_argument("--bare", action="store_true", help="also K bare engines, K as auto chose")
    sweep.add_argument("--bare-engines", type=int, help="K for --bare (default: auto's count)")
    mixed = sub.add_parser("mixed", parents=[common], help="interactive latency beside a bulk backlog")
    mixed.add_argument("--bulk-jobs", type=int, default=20_000)
    mixed.add_argument("--interactive-rate", type=float, default=1.0, help="interactive jobs per second")
    mixed.add_argument("--interactive-jobs", type=int, default=60, help="per probe (idle, then loaded)")
    mixed.add_argument("--lanes", choices=("on", "off"), default="on", help="off: bulk jobs in the interactive lane")
    mixed.add_argument("--probe-timeout", type=float, default=60, help="a probe job open this long is censored")
    mixed.add_argument("--settle-s", type=float, default=5, help="wait after submitting the bulk jobs")
    mixed.add_argument("--bulk-alone", action="store_true", help="then bulk jobs/s without interactive jobs")
    mixed.add_argument("--bulk-alone-s", type=float, default=20)
    mixed.add_argument("--engines", default="1", help="engines per GPU: a count or auto (default 1)")
    mixed.add_argument(
        "--interactive-engine",
        action="store_true",
        help="the worker's --interactive-engine: one more engine for interactive jobs, the others lane policy bulk",
    )
    mixed.add_argument("--interactive-max-seqs", type=int, help="the worker's --interactive-max-seqs (default its own)")
    orphans = sub.add_parser("orphans", parents=[common], help="kill one of two workers; recovery time")
    orphans.add_argument("--jobs", type=int, default=4000)
    orphans.add_argument("--lane", choices=("bulk", "interactive", "mixed"), default="mixed")
    orphans.add_argument("--kill-at", type=float, default=1 / 3, help="share of jobs done when one worker is killed")
    orphans.add_argument("--recovery-timeout", type=float, default=120)
    one = sub.add_parser("bare-one", parents=[common], help="(sweep --bare's child) one bare engine")
    one.add_argument("--share", required=True, help="i/K: this engine's share of the requests")
    one.add_argument("--jobs", type=int, required=True)
    one.add_argument("--barrier", type=Path, required=True, help="folder: ready-i written, go awaited")
    args = parser.parse_args(argv)
    if args.command == "mixed" and args.interactive_engine and args.lanes == "off":
        parser.error("--lanes off queues bulk jobs as interactive ones: nothing for --interactive-engine to keep apart")
    if args.gpu_memory_utilization is None:
        args.gpu_memory_utilization = 0.4 if args.command == "orphans" else 0.85
    return args


def gpu_names(listing: str) -> str:
    """``nvidia-smi``'s one name per GPU as ``2 x NVIDIA H200`` (or the one name)."""
    names = [line.strip() for line in listing.splitlines() if line.strip()]
    if len(set(names)) == 1 and len(names) > 1:
        return f"{len(names)} x {names[0]}"
    return ", ".join(names) or "no GPU"


def header(args: argparse.Namespace) -> dict[str, Any]:
    """What the report says about this run before any point."""
    gpu = shutil.which("nvidia-smi")
    name = (
        subprocess.run([gpu, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        if gpu
        else None
    )
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": "python -m bench.engines " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {gpu_names(name.stdout) if name else 'no GPU'}",
        "model": args.model.name,
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "ignore_eos": ignore_eos(args),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, start the services, run the subcommand (SIGTERM stops the workers too)."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.command == "bare-one":
        run_bare_one(args)
        return
    out = args.out or Path(f"bench/out/engines-{args.command}-{args.model.name}.json")
    logs = args.logs or out.with_name(f"{out.stem}-logs")
    report = Report(out, header(args))
    say(f"{args.command}: report {out}, logs {logs}")
    with benchmark_servers() as urls:
        bench = Bench(args, urls, report, logs, load_tokenizer(args.model))
        {"sweep": run_sweep, "mixed": run_mixed, "orphans": run_orphans}[args.command](bench)
    say(f"done: {out}")


if __name__ == "__main__":
    main()
