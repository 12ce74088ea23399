"""What watching a generation for loops costs (``stop_on_repetition``), and what it saves.

    python -m bench.watch_cost --jobs 48 --rounds 2 --every 16,1 --loop-jobs 40 --out bench/results/watch-cost-cpu.json
    # the GPU (../shared/gpu/README.md), a 135M shape with dummy weights: the frontend's cost shows there
    python -m bench.watch_cost --model .gpu/models/smollm2-135m-shape --ignore-eos --jobs 2000 --every 16,1 \
        --loop-jobs 0 --engine-arg=--load-format=dummy --engine-arg=--no-enforce-eager --engine-arg=--max-num-seqs=256

One process, one real engine (the default model unless ``--model``; dragoman's device defaults,
prefix caching off so every phase does the same prefill work), driven directly through
:class:`worker.vllm_engine.VllmEngine` with the worker's few-shot prompts and first output
budgets, at most ``--in-flight`` requests at once (the worker's 2 x max_num_seqs by default).

1. Cost: the same ``--jobs`` ordinary requests (one plain English sentence each, en->fr: the
   few-shot profile sends one sentence per request)
   with the flag off (``FINAL_ONLY``, today's hot path) and on (``DELTA`` outputs watched every
   ``--every`` tokens, several values), phase after phase in one run, the order reversed every
   round so a drift of the machine falls on every mode alike. Per phase: jobs/s, output tok/s
   (tokens returned / wall time), the frontend process's CPU seconds per job (``process_time``:
   the part of the cost streaming adds), finish reasons.
2. Savings: ``--loop-jobs`` texts of 3-40 random words (the shape that makes the default model
   loop, issue 34) with the flag off and on: tokens vLLM generated (its own counter, so tokens past
   a checkpoint before the abort reached the engine are counted), against the budgets, and how
   each request ended.
Writes JSON; the README of the numbers is bench/RESULTS.md, "Issue 34: watching the stream".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.engine_trace import vllm_sums
from bench.workload import WORDS
from contract.schemas import JobSpec
from contract.settings import Settings
from worker.engine import GenerationRequest
from worker.loop_watch import WATCH_EVERY_TOKENS
from worker.model import prepare_default_model
from worker.profiles import FewShotProfile
from worker.runtime import freeze_startup_heap, run_event_loop
from worker.translator import Translator
from worker.vllm_engine import VllmEngine

SUBJECTS = (
    "The train to the airport",
    "Our new colleague",
    "My brother",
    "The small hotel near the station",
    "The children from the village",
    "The support team",
    "Her grandmother",
    "The museum in the old town",
)
VERBS = (
    "leaves",
    "arrives",
    "opens",
    "closes",
    "starts working",
    "stays quiet",
    "waits for us",
    "changes its plans",
)
TIMES = (
    "every morning.",
    "before the meeting on Friday.",
    "after the long summer holidays.",
    "at nine o'clock.",
    "when it rains.",
    "later than we expected.",
    "on Mondays and Thursdays.",
    "during the winter.",
)
"""Ordinary one-sentence jobs are built from these: the few-shot profile sends the engine one
sentence at a time (a job of several sentences is several requests), so a request is one sentence."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's prompt and first output budget, as the worker computes them."""

    prompt_ids: list[int]
    max_tokens: int


def sentence_texts(count: int, seed: int = 34) -> list[str]:
    """Ordinary requests: one plain sentence each (512 different ones)."""
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(TIMES)}" for _ in range(count)]


def random_word_texts(count: int, seed: int = 34) -> list[str]:
    """Issue 34's looping shape: 3-40 words drawn at random, no sentence structure."""
    rng = random.Random(seed)
    vocabulary = sorted(set(WORDS))
    return [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 40))) for _ in range(count)]


def prompts(engine: VllmEngine, texts: list[str], settings: Settings) -> list[Prompt]:
    """Few-shot prompts and first budgets exactly as :class:`worker.translator.Translator` builds them."""
    profile = FewShotProfile(engine.tokenizer)
    translator = Translator(engine, profile, settings.max_new_tokens, settings.output_tokens_ratio)
    built = []
    for text in texts:
        spec = JobSpec(job_id=str(uuid.uuid4()), text=text, source_lang="en", target_lang="fr", created_at=0.0)
        ids = profile.prompt_token_ids(spec)
        source = len(engine.tokenizer.encode(text, add_special_tokens=False))
        built.append(Prompt(ids, translator.max_tokens_for(len(ids), source)))
    return built


async def feed(
    engine: VllmEngine, batch: list[Prompt], stop_ids: tuple[int, ...], watched: bool, in_flight: int
) -> dict[str, Any]:
    """Every prompt through the engine, at most ``in_flight`` at once; the phase's figures."""
    slots = asyncio.Semaphore(in_flight)
    lengths: list[int] = []
    reasons: Counter[str] = Counter()
    stops: list[tuple[int, int]] = []  # (tokens kept, budget) of each request stopped on repetition

    async def one(prompt: Prompt) -> None:
        try:
            result = await engine.generate(
                GenerationRequest(
                    f"watch-{uuid.uuid4().hex[:8]}",
                    prompt.prompt_ids,
                    prompt.max_tokens,
                    stop_ids,
                    stop_on_repetition=watched,
                )
            )
        finally:
            slots.release()
        lengths.append(len(result.token_ids))
        reasons[str(result.finish_reason)] += 1
        if result.finish_reason == "repetition":
            stops.append((len(result.token_ids), prompt.max_tokens))

    before = vllm_sums({"vllm:generation_tokens": "generated"}, suffix="_total")["generated"]
    cpu, start = time.process_time(), time.perf_counter()
    tasks = []
    for prompt in batch:
        await slots.acquire()
        tasks.append(asyncio.create_task(one(prompt)))
    await asyncio.gather(*tasks)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    generated = vllm_sums({"vllm:generation_tokens": "generated"}, suffix="_total")["generated"] - before
    returned = sum(lengths)
    return {
        "jobs": len(batch),
        "elapsed_s": round(elapsed, 2),
        "jobs_per_s": round(len(batch) / elapsed, 3),
        "output_tokens": returned,
        "output_tok_per_s": round(returned / elapsed, 1),
        "generated_tokens": int(generated),
        "budget_tokens": sum(p.max_tokens for p in batch),
        "frontend_cpu_ms_per_job": round(1000 * cpu / len(batch), 2),
        "finish_reasons": dict(reasons),
        "repetition_stops": stops,
    }


def _mode(every: int | None) -> str:
    return "off" if every is None else f"on-every-{every}"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the engine, then the cost rounds and the savings phases."""
    settings = Settings()
    model = args.model or prepare_default_model(settings.model_cache_dir)
    started = time.perf_counter()
    engine = VllmEngine.start(model, ["--no-enable-prefix-caching", *args.engine_arg], ignore_eos=args.ignore_eos)
    result: dict[str, Any] = {
        "model": model.name,
        "engine_start_s": round(time.perf_counter() - started, 1),
        "max_num_seqs": engine.max_num_seqs,
        "host": f"{platform.node()} ({os.cpu_count()} cores)",
        "load_average_at_start": os.getloadavg(),
    }
    freeze_startup_heap()
    try:
        stop_ids = tuple(FewShotProfile(engine.tokenizer).stop_token_ids())
        in_flight = args.in_flight or 2 * engine.max_num_seqs
        result["in_flight"] = in_flight
        normal = prompts(engine, sentence_texts(args.jobs), settings)
        await feed(engine, prompts(engine, sentence_texts(16, seed=1), settings), stop_ids, False, in_flight)  # warm-up
        modes: list[int | None] = [None, *args.every]
        rounds: list[dict[str, Any]] = []
        for number in range(args.rounds):
            order = modes if number % 2 == 0 else modes[::-1]
            phase: dict[str, Any] = {}
            for every in order:
                if every is not None:
                    engine.watch_every = every
                phase[_mode(every)] = await feed(engine, normal, stop_ids, every is not None, in_flight)
                print(number, _mode(every), {k: v for k, v in phase[_mode(every)].items() if k != "repetition_stops"})
            rounds.append(phase)
        result["cost_rounds"] = rounds
        result["cost_summary"] = summarise(rounds, modes)
        if args.loop_jobs:
            engine.watch_every = WATCH_EVERY_TOKENS
            first = prompts(engine, random_word_texts(args.loop_jobs), settings)
            savings: dict[str, Any] = {}
            for factor in args.loop_budget_factors:
                # 1: the first budget; 2: the bounded retry's (twice the first, the runaway default)
                room = engine.max_model_len
                looping = [Prompt(p.prompt_ids, min(p.max_tokens * factor, room - len(p.prompt_ids))) for p in first]
                for every in (None, WATCH_EVERY_TOKENS):
                    name = f"budget-x{factor}-{_mode(every)}"
                    savings[name] = await feed(engine, looping, stop_ids, every is not None, in_flight)
                    print("loops", name, {k: v for k, v in savings[name].items() if k != "repetition_stops"})
            result["savings"] = savings
        result["load_average_at_end"] = os.getloadavg()
    finally:
        engine.shutdown()
    return result


def summarise(rounds: list[dict[str, Any]], modes: list[int | None]) -> dict[str, Any]:
    """Per mode: median jobs/s, output tok/s and frontend CPU per job over the rounds, and the
    ratio of each round's figure to the same round's flag-off figure (median and range)."""
    summary: dict[str, Any] = {}
    for every in modes:
        name = _mode(every)
        ratios = [r[name]["jobs_per_s"] / r["off"]["jobs_per_s"] for r in rounds]
        summary[name] = {
            "jobs_per_s": statistics.median(r[name]["jobs_per_s"] for r in rounds),
            "output_tok_per_s": statistics.median(r[name]["output_tok_per_s"] for r in rounds),
            "frontend_cpu_ms_per_job": statistics.median(r[name]["frontend_cpu_ms_per_job"] for r in rounds),
            "jobs_per_s_vs_off": {
                "median": round(statistics.median(ratios), 3),
                "min": round(min(ratios), 3),
                "max": round(max(ratios), 3),
            },
        }
    return summary


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: the default model)")
    parser.add_argument("--jobs", type=int, default=200, help="ordinary jobs per phase")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every mode (order reversed each round)")
    parser.add_argument(
        "--every", type=lambda s: [int(x) for x in s.split(",") if x], default=[WATCH_EVERY_TOKENS], help="intervals"
    )
    parser.add_argument("--loop-jobs", type=int, default=60, help="random-word jobs for the savings phases (0: none)")
    parser.add_argument(
        "--loop-budget-factors", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2], help="x first budget"
    )
    parser.add_argument("--in-flight", type=int, default=0, help="requests in flight (default 2 x max_num_seqs)")
    parser.add_argument("--engine-arg", action="append", default=[], help="more vLLM engine arguments")
    parser.add_argument("--ignore-eos", action="store_true", help="every output runs to its budget (dummy weights)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = run_event_loop(run(args))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(json.dumps(result["cost_summary"], indent=2))


if __name__ == "__main__":
    main()
