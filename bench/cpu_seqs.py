"""max_num_seqs sweep of the CPU engine: dragoman end to end, default model, profile and settings.

    python -m bench.cpu_seqs --jobs 64 --sweep 4,8,16,32,64 --out bench/results/cpu-seqs-sweep.json
    # issue 15's sweep (bench/results/cpu-seqs-sweep.json): short seed-workload texts, runaway answers
    # bounded at 128 tokens; then a fuller burst; then the default (unbounded) budget, cut at 130 s
    python -m bench.cpu_seqs --jobs 40 --lengths 10-56 --max-new-tokens 128 --sweep 4,8,16,32,64
    python -m bench.cpu_seqs --jobs 128 --lengths 10-56 --max-new-tokens 128 --sweep 16,32,64
    python -m bench.cpu_seqs --jobs 64 --lengths 10-56 --sweep 16,32,64 --warm-up 0 --point-timeout 130

``bench.gpu`` measures throughput with dummy weights and length-bound outputs, and before its
sweep it runs three feeds on a first engine; here each point is only what ``dragoman worker``
runs with no options but ``--max-num-seqs``: a fresh engine with dragoman's CPU defaults
(``worker.engine_args.CPU_DEFAULTS``: CPU KV cache, eager), the profile the worker chooses for
the model, default ``Settings`` (so the
default output budget ratio, not ``bench.gpu``'s 1.0), in flight = ``--in-flight-factor`` x
max_num_seqs. Outputs end where the model ends them (end of line / EOS), as in the demo.

Every point gets the same jobs (the seed workload's short texts, ``bench.workload``), after a
short warm-up of other texts, all submitted at once, timed from the first submit to the last
committed row. Per point: engine start, jobs/s, output tokens/s, run latency (started to
finished, what in flight costs each job) and total latency (submit to finished) percentiles,
finish reasons, and ``bench.engine_trace``'s means (running/waiting sequences, KV cache, CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench.engine_trace import EngineTrace, vllm_sums
from bench.gpu import Outcome, _percentiles, build_requests, run_bare, start_engine, summarise
from bench.servers import benchmark_servers
from bench.workload import texts_of_lengths, token_lengths
from contract.schemas import Job, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.engine_args import CPU_DEFAULTS
from worker.profiles import PromptProfile, choose_profile
from worker.runtime import freeze_startup_heap, run_event_loop
from worker.service import Worker


def engine_counters() -> dict[str, float]:
    """vLLM's token and preemption counters (all engines of this process, summed)."""
    wanted = {
        "vllm:generation_tokens": "generation_tokens",
        "vllm:prompt_tokens": "prompt_tokens",
        "vllm:num_preemptions": "preemptions",
    }
    return vllm_sums(wanted, suffix="_total")


async def run_jobs(
    engine: Any,
    texts: list[str],
    urls: ServiceUrls,
    in_flight: int,
    profile: PromptProfile,
    timeout_s: float,
    max_new_tokens: int | None,
) -> tuple[float, list[Job], dict[str, Any]]:
    """Submit every text to Redis, run a default-settings worker until the last row is committed
    (or ``timeout_s``); the elapsed time, the jobs and the engine trace's means."""
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        key_prefix=f"cpu-{uuid.uuid4().hex[:8]}",
        max_new_tokens=max_new_tokens,
    )
    worker = Worker(
        settings,
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=profile,
        max_in_flight=in_flight,
    )
    done = [0]
    trace = EngineTrace(engine.frontend, done)
    await worker.start()
    with Client(settings) as client:
        before = engine_counters()
        async with trace.running():
            start = time.perf_counter()
            ids = await asyncio.to_thread(client.submit_many, [TranslationRequest(t, "en", "fr") for t in texts])
            timeline, next_sample = [], start + 5.0
            while (rows := worker.writer.stats.rows) < len(texts) and time.perf_counter() - start < timeout_s:
                done[0] = rows
                if time.perf_counter() >= next_sample:  # engine-side tokens every 5 s: the rate over time
                    now = engine_counters()
                    timeline.append(
                        {"t": round(next_sample - start), "rows": rows} | {k: now[k] - before[k] for k in now}
                    )
                    next_sample += 5.0
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - start
        after = engine_counters()
        await worker.stop()
        jobs = [client.get(job_id) for job_id in ids]
    engine_side = {k: after[k] - before[k] for k in after}
    engine_side["generation_tokens_per_s"] = round(engine_side["generation_tokens"] / elapsed, 1)
    return (
        elapsed,
        jobs,
        {"engine": engine_side, "engine_timeline": timeline, "trace_means": trace.summary(), "trace": trace.samples},
    )


def input_lengths(args: argparse.Namespace) -> list[int]:
    """The seed workload's lengths, or ``--lengths MIN-MAX`` drawn the same way."""
    if args.lengths is None:
        return token_lengths(args.jobs, args.workload)
    low, high = (int(v) for v in args.lengths.split("-"))
    rng = random.Random(2026)
    return [rng.randint(low, high) for _ in range(args.jobs)]


async def sweep(args: argparse.Namespace, urls: ServiceUrls) -> dict[str, Any]:
    """One fresh engine per max_num_seqs value, the same jobs on each."""
    values = [int(v) for v in args.sweep.split(",") if v.strip()]
    result: dict[str, Any] = {
        "model": str(args.model),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "jobs": args.jobs,
        "workload": args.workload,
        "lengths": args.lengths,
        "in_flight_factor": args.in_flight_factor,
        "warm_up_jobs": args.warm_up,
        "engine_defaults": {k: str(v) for k, v in CPU_DEFAULTS.items()},
        "settings": {
            "output_tokens_ratio": Settings().output_tokens_ratio,
            "max_new_tokens": args.max_new_tokens,
        },
        "points": [],
    }
    lengths = input_lengths(args)
    texts: list[str] | None = None
    for value in values:
        engine, started_s = start_engine(args.model, ([f"--max-num-seqs={value}"], False))
        freeze_startup_heap()
        try:
            profile = choose_profile(None, args.model, engine.tokenizer)
            if texts is None:  # same texts on every point (the tokenizer is the same)
                texts = texts_of_lengths(engine.tokenizer, lengths, seed=1)
                warm = texts_of_lengths(engine.tokenizer, lengths[: args.warm_up], seed=4)
                result["profile"] = profile.name
                result["input_tokens"] = [len(engine.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
            in_flight = args.in_flight_factor * value
            warm_start = time.perf_counter()
            if args.warm_up:
                warm_settings = Settings(max_new_tokens=args.max_new_tokens)
                requests = build_requests(engine, warm, warm_settings, profile)  # type: ignore[arg-type]
                await run_bare(engine, requests, in_flight)
            warm_s = round(time.perf_counter() - warm_start, 1)
            elapsed, jobs, trace = await run_jobs(
                engine, texts, urls, in_flight, profile, args.point_timeout, args.max_new_tokens
            )
        finally:
            engine.shutdown()
        finished = [j for j in jobs if j.finished_at is not None]
        outcomes = [Outcome(j.run_seconds or 0.0, j.output_tokens or 0) for j in finished]
        point = {
            "max_num_seqs": value,
            "in_flight": in_flight,
            "engine_start_s": started_s,
            "warm_up_s": warm_s,
            "complete": len(finished) == len(jobs),
            **summarise(elapsed, outcomes, [j.prompt_tokens or 0 for j in finished]),
            "total_latency_s": _percentiles([j.total_seconds or 0.0 for j in finished]),
            "output_tokens": sum(o.output_tokens for o in outcomes),
            "mean_output_tokens": round(sum(o.output_tokens for o in outcomes) / max(len(outcomes), 1), 1),
            "statuses": dict(Counter(str(j.status) for j in jobs)),
            "finish_reasons": dict(Counter(str(j.finish_reason) for j in finished)),
            "attempts": dict(Counter(j.attempts for j in finished)),
            **trace,
            "per_job": [
                [j.prompt_tokens, j.output_tokens, j.finish_reason, j.attempts, j.run_seconds, j.total_seconds]
                for j in jobs
            ],
        }
        result["points"].append(point)
        print(
            f"max_num_seqs={value} in_flight={in_flight}: start {started_s}s, {point['jobs']} jobs in "
            f"{point['seconds']}s, {point['jobs_per_s']} jobs/s, {point['output_tokens_per_s']} tok/s, "
            f"run p50/p95 {point['latency_s']}, total {point['total_latency_s']}, "
            f"{point['finish_reasons']} {json.dumps(point['engine'])} {json.dumps(point['trace_means'])}",
            flush=True,
        )
        if args.out:  # after every point: a cut-short sweep keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1))
    return result


def main() -> None:
    """Run the sweep; print a line per point and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="default: the prepared default model")
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--sweep", default="4,8,16,32,64", help="max_num_seqs values")
    parser.add_argument("--in-flight-factor", type=int, default=2, help="in flight = this x max_num_seqs")
    parser.add_argument("--workload", default="realistic", choices=["realistic", "uniform"])
    parser.add_argument(
        "--lengths", help="MIN-MAX input tokens, uniformly spread (seed 2026): shorter seed-workload texts"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        help="the worker's DRAGOMAN_MAX_NEW_TOKENS (default: none, as `dragoman worker`): bounds what a job that "
        "never ends its answer costs, first attempt and retry",
    )
    parser.add_argument("--warm-up", type=int, default=4, help="jobs fed to each fresh engine before timing")
    parser.add_argument("--point-timeout", type=float, default=600.0, help="seconds; a point cut short says so")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.model is None:
        from worker.model import prepare_default_model

        args.model = prepare_default_model(Settings().model_cache_dir)
    with benchmark_servers() as urls:
        # One event loop for everything: AsyncLLM's output handler lives on the loop of its first request.
        run_event_loop(sweep(args, urls))


if __name__ == "__main__":
    main()
