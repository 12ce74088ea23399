"""Continuous feed vs static batches vs dragoman end to end, on one engine, side by side.

    python -m bench.gpu --model .gpu/models/smollm2-135m-shape --load-format dummy --jobs 2000
    python -m bench.gpu --model ~/.cache/dragoman/models/gemma-3-270m --jobs 40 --max-num-seqs 8 \
        --sweep "" --enforce-eager --gpu-memory-utilization 0.25      # a CPU smoke run

One process per model. With the same AsyncLLM settings and the same requests (few-shot prompts
from the workload, output budget = input length + 16, ``ignore_eos`` for dummy weights):
1. bare: the engine fed continuously in-process, at most 2 x max_num_seqs in flight (the ceiling);
2. dragoman: jobs submitted to Redis, the worker translating, rows committed, events published,
   timed from the first submit to the last committed row (embedded Redis and PostgreSQL);
3. static: the seed's "attempt 2", batches of 16 with a 50 ms fill timeout, each awaited whole;
then a max_num_seqs sweep of (2), each point on a freshly started engine.
Reports jobs/s, output tokens/s, p50/p95/p99 latency overall and for the shortest quarter of
jobs, the engine start time, and the ratios (2)/(1) and (2)/(3). Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.engine_trace import EngineTrace, py_spy
from bench.servers import benchmark_servers
from bench.workload import texts_of_lengths, token_lengths
from contract.schemas import JobSpec, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.engine import GenerationRequest
from worker.engine_args import GPU_DEFAULTS
from worker.profiles import FewShotProfile
from worker.runtime import freeze_startup_heap, run_event_loop
from worker.service import Worker
from worker.translator import Translator
from worker.vllm_engine import VllmEngine

OUTPUT_RATIO = 1.0  # output length = input length (+16), as in the seed's workload
STATIC_BATCH, STATIC_TIMEOUT_S = 16, 0.05
EngineStart = tuple[list[str], bool]  # vLLM's engine arguments, and ignore_eos


class LengthBoundProfile(FewShotProfile):
    """Few-shot prompts without the end-of-line stop: with dummy weights (and ``ignore_eos``) every
    output is exactly ``max_tokens`` long, in all three feeds alike."""

    name = "few-shot-length-bound"

    def stop_token_ids(self) -> tuple[int, ...]:
        """No stop tokens."""
        return ()


@dataclass(frozen=True, slots=True)
class Request:
    """One benchmark request, identical for every feed."""

    index: int
    prompt_ids: list[int]
    max_tokens: int
    input_tokens: int
    stop_ids: tuple[int, ...]


@dataclass(slots=True)
class Outcome:
    """Per-request timing and size."""

    latency_s: float
    output_tokens: int


def build_requests(engine: VllmEngine, texts: list[str], settings: Settings, profile: FewShotProfile) -> list[Request]:
    """Prompts, output budgets and stop tokens exactly as the worker computes them."""
    translator = Translator(engine, profile, settings.max_new_tokens, OUTPUT_RATIO)
    stop_ids = tuple(profile.stop_token_ids())
    requests = []
    for i, text in enumerate(texts):
        spec = JobSpec(job_id=str(uuid.uuid4()), text=text, source_lang="en", target_lang="fr", created_at=0.0)
        ids = translator.profile.prompt_token_ids(spec)
        source = len(engine.tokenizer.encode(text, add_special_tokens=False))
        requests.append(Request(i, ids, translator.max_tokens_for(len(ids), source), source, stop_ids))
    return requests


async def _one(engine: VllmEngine, request: Request, tag: str) -> Outcome:
    start = time.perf_counter()
    result = await engine.generate(
        GenerationRequest(
            f"{tag}-{request.index}-{uuid.uuid4().hex[:6]}", request.prompt_ids, request.max_tokens, request.stop_ids
        )
    )
    return Outcome(time.perf_counter() - start, len(result.token_ids))


async def run_bare(
    engine: VllmEngine, requests: list[Request], in_flight: int, done: list[int] | None = None
) -> tuple[float, list[Outcome]]:
    """Feed every request continuously, never more than ``in_flight`` at once (``done[0]`` counts)."""
    slots = asyncio.Semaphore(in_flight)
    outcomes: list[Outcome | None] = [None] * len(requests)
    done = done if done is not None else [0]

    async def feed(request: Request) -> None:
        try:
            outcomes[request.index] = await _one(engine, request, "bare")
            done[0] += 1
        finally:
            slots.release()

    start = time.perf_counter()
    tasks = []
    for request in requests:
        await slots.acquire()
        tasks.append(asyncio.create_task(feed(request)))
    await asyncio.gather(*tasks)
    return time.perf_counter() - start, [o for o in outcomes if o is not None]


async def run_static(engine: VllmEngine, requests: list[Request]) -> tuple[float, list[Outcome]]:
    """The seed's static batching: up to 16 requests or 50 ms, then the whole batch awaited."""
    queue: asyncio.Queue[Request] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    outcomes: list[Outcome] = []
    start = time.perf_counter()
    while not queue.empty():
        batch = [await queue.get()]
        deadline = time.perf_counter() + STATIC_TIMEOUT_S
        while len(batch) < STATIC_BATCH and (remaining := deadline - time.perf_counter()) > 0:
            try:
                batch.append(await asyncio.wait_for(queue.get(), remaining))
            except TimeoutError:
                break
        batch_start = time.perf_counter()
        results = await asyncio.gather(*(_one(engine, r, "static") for r in batch))
        batch_end = time.perf_counter()
        # Every request of a static batch is answered when the slowest one is.
        outcomes += [Outcome(batch_end - batch_start, r.output_tokens) for r in results]
    return time.perf_counter() - start, outcomes


async def run_dragoman(
    engine: VllmEngine,
    texts: list[str],
    urls: ServiceUrls,
    in_flight: int,
    profile: FewShotProfile,
    done: list[int] | None = None,
) -> tuple[float, list[Outcome], list[int]]:
    """Submit every job to Redis, run the worker on ``engine``, wait for the last committed row."""
    done = done if done is not None else [0]
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        output_tokens_ratio=OUTPUT_RATIO,
        key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
    )
    worker = Worker(
        settings,
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=profile,
        max_in_flight=in_flight,
    )
    await worker.start()
    with Client(settings) as client:
        start = time.perf_counter()
        ids = await asyncio.to_thread(client.submit_many, [TranslationRequest(t, "en", "fr") for t in texts])
        while (rows := worker.writer.stats.rows) < len(texts):
            done[0] = rows
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - start
        await worker.stop()
        jobs = [client.get(job_id) for job_id in ids]
    outcomes = [Outcome(j.run_seconds or 0.0, j.output_tokens or 0) for j in jobs]
    return elapsed, outcomes, [j.prompt_tokens or 0 for j in jobs]


def summarise(elapsed: float, outcomes: list[Outcome], input_tokens: list[int]) -> dict[str, Any]:
    """jobs/s, output tokens/s, latency percentiles overall and for the shortest quarter."""
    latencies = [o.latency_s for o in outcomes]
    cutoff = sorted(input_tokens)[len(input_tokens) // 4]
    short = [o.latency_s for o, n in zip(outcomes, input_tokens, strict=True) if n <= cutoff]
    return {
        "jobs": len(outcomes),
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(len(outcomes) / elapsed, 2),
        "output_tokens_per_s": round(sum(o.output_tokens for o in outcomes) / elapsed, 1),
        "latency_s": _percentiles(latencies),
        "shortest_quarter_latency_s": _percentiles(short),
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"p50": round(values[0], 3) if values else 0.0}
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(q[49], 3), "p95": round(q[94], 3), "p99": round(q[98], 3)}


def start_engine(model: Path, options: EngineStart) -> tuple[VllmEngine, float]:
    """Start an engine (its vLLM engine arguments, ignore_eos) and time it."""
    start = time.perf_counter()
    engine = VllmEngine.start(model, options[0], ignore_eos=options[1])
    return engine, round(time.perf_counter() - start, 1)


async def run_all(args: argparse.Namespace, options: Any, urls: ServiceUrls) -> dict[str, Any]:
    """The three feeds on one engine, the ratios, then the sweep on fresh engines."""
    result: dict[str, Any] = {
        "model": args.model.name,
        "workload": args.workload,
        "load_format": args.load_format,
        "max_num_seqs": args.max_num_seqs,
        "max_cudagraph_capture_size": args.max_cudagraph_capture_size,
    }
    engine, started_s = start_engine(args.model, options(args.max_num_seqs))
    result["engine_start_s"] = started_s
    freeze_startup_heap()  # as `dragoman worker` does once its engine is up
    in_flight = 2 * args.max_num_seqs
    # Same lengths in every phase, different words: no phase finds another's prompts in the
    # prefix cache (only the shared few-shot header, as in production).
    lengths = token_lengths(args.jobs, args.workload)
    texts, bare_texts, static_texts, warm_texts = (
        texts_of_lengths(engine.tokenizer, lengths, seed=seed) for seed in (1, 2, 3, 4)
    )
    profile_class = LengthBoundProfile if args.load_format == "dummy" else FewShotProfile
    requests = build_requests(engine, bare_texts, Settings(), profile_class(engine.tokenizer))
    warm_up = build_requests(engine, warm_texts[:512], Settings(), profile_class(engine.tokenizer))
    inputs = [r.input_tokens for r in requests]
    try:
        await run_bare(engine, warm_up, in_flight)  # CUDA graphs, autotuning, allocator
        for phase in ("dragoman", "bare") if args.dragoman_first else ("bare", "dragoman"):
            done = [0]
            trace = EngineTrace(engine.frontend, done)
            async with py_spy(args.py_spy, f"{args.model.name}-{args.max_num_seqs}-{phase}"), trace.running():
                if phase == "bare":
                    elapsed, outcomes = await run_bare(engine, requests, in_flight, done)
                else:
                    elapsed, outcomes, _ = await run_dragoman(
                        engine, texts, urls, in_flight, profile_class(engine.tokenizer), done
                    )
            result[phase] = summarise(elapsed, outcomes, inputs) | {"trace_means": trace.summary()}
            result.setdefault("traces", {})[phase] = trace.samples
            print(phase, json.dumps(result[phase]), flush=True)
        static_requests = build_requests(
            engine, static_texts[: args.static_jobs], Settings(), profile_class(engine.tokenizer)
        )
        elapsed, outcomes = await run_static(engine, static_requests)
        result["static16"] = summarise(elapsed, outcomes, [r.input_tokens for r in static_requests])
    finally:
        engine.shutdown()
    result["ratios"] = {
        "dragoman_vs_bare": round(result["dragoman"]["jobs_per_s"] / result["bare"]["jobs_per_s"], 3),
        "dragoman_vs_static16": round(result["dragoman"]["jobs_per_s"] / result["static16"]["jobs_per_s"], 2),
    }
    print(json.dumps({k: result[k] for k in ("static16", "ratios")}), flush=True)
    result["sweep"] = []
    for value in [int(v) for v in args.sweep.split(",") if v.strip()]:
        engine, started_s = start_engine(args.model, options(value))
        try:
            elapsed, outcomes, _ = await run_dragoman(
                engine, texts[: args.sweep_jobs], urls, 2 * value, profile_class(engine.tokenizer)
            )
        finally:
            engine.shutdown()
        point = summarise(elapsed, outcomes, inputs[: args.sweep_jobs])
        result["sweep"].append({"max_num_seqs": value, "engine_start_s": started_s, **point})
        print(f"sweep max_num_seqs={value}: {point['jobs_per_s']} jobs/s", flush=True)
    return result


def main() -> None:
    """Run the three feeds on one engine, then the sweep; print and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--load-format", default="auto")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--static-jobs", type=int, default=500, help="static batching is slow: fewer jobs")
    parser.add_argument("--sweep-jobs", type=int, default=1000)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--sweep", default="16,32,64,128,256,512", help="max_num_seqs values; empty to skip")
    parser.add_argument("--workload", default="realistic", choices=["realistic", "uniform"])
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument(
        "--max-cudagraph-capture-size",
        type=int,
        default=GPU_DEFAULTS["max_cudagraph_capture_size"],
        help="as `dragoman worker` (default %(default)s; 0: vLLM's, min(2 x seqs, 512))",
    )
    parser.add_argument(
        "--log-stats",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="vLLM's engine metrics, as `dragoman worker` has them by default",
    )
    parser.add_argument(
        "--dragoman-first",
        action="store_true",
        help="run the dragoman feed before the bare one (to see whether order matters)",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="record each continuous feed with py-spy (this process and vLLM's) into DIR",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    dummy = args.load_format == "dummy"

    def options(max_num_seqs: int) -> EngineStart:
        engine_args = [
            *(f"--max-num-seqs={max_num_seqs}", f"--max-model-len={args.max_model_len}"),
            *(f"--load-format={args.load_format}", f"--gpu-memory-utilization={args.gpu_memory_utilization}"),
            "--enforce-eager" if args.enforce_eager else "--no-enforce-eager",
            # 0: vLLM's own default, spelled out (dragoman's would apply otherwise).
            f"--max-cudagraph-capture-size={args.max_cudagraph_capture_size or min(2 * max_num_seqs, 512)}",
            *([] if args.log_stats else ["--disable-log-stats"]),
        ]
        return engine_args, dummy

    with benchmark_servers() as urls:
        # One event loop for everything: AsyncLLM's output handler lives on the loop of its first request.
        result = run_event_loop(run_all(args, options, urls))
    for name in ("bare", "dragoman", "static16"):
        r = result[name]
        short = r["shortest_quarter_latency_s"]["p50"]
        print(
            f"{name:>9}: {r['jobs_per_s']:8.2f} jobs/s {r['output_tokens_per_s']:9.1f} tok/s  "
            f"p50 {r['latency_s']['p50']}s  shortest-quarter p50 {short}s"
        )
    print(f"ratios: {result['ratios']}  engine start {result['engine_start_s']}s")
    out = args.out or Path(f"bench/out/gpu-{args.model.name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
