"""The translation memory: jobs/s with it on and off, side by side, on a document whose segments repeat.

    python -m bench.memory [--engine zero-cost|cpu|both] [--segments 160] [--repeat-share 0.3]
                           [--rounds 2] [--out bench/results/memory.json]

A document's segments (natural sentences; ``--repeat-share`` of them repeat earlier ones, the way
boilerplate does: headers, disclaimers, UI strings) are queued as bulk jobs, then one worker in
this process translates them; jobs/s is segments over worker start to last row. Each round runs
the memory off, then on (emptied first), on the same engine: ``zero-cost`` is the deterministic
engine (what the memory costs the pipeline), ``cpu`` the real vLLM CPU engine with the default
model (what it saves). Then the stale check: the same texts through workers whose model folders
differ (another revision) must find nothing, and the first folder again finds everything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.servers import benchmark_servers
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url
from storage.memory import MemoryStore
from worker.deterministic_engine import DeterministicEngine
from worker.engine import TranslationEngine
from worker.profiles import IdentityProfile, PromptProfile, choose_profile
from worker.runtime import run_event_loop
from worker.service import Worker

SUBJECTS = (
    "The invoice",
    "Your order",
    "The meeting room",
    "The new office",
    "Our support team",
    "The train to Lyon",
    "The museum",
    "This report",
    "The library",
    "The hotel breakfast",
    "The parcel",
    "The next workshop",
)
PREDICATES = (
    "is ready for review.",
    "will arrive on Monday morning.",
    "is closed for cleaning today.",
    "opens at nine o'clock.",
    "has been moved to the second floor.",
    "answers every message within a day.",
    "leaves from platform four.",
    "was updated last week.",
    "is free for children under twelve.",
    "is served until ten.",
)


def document_segments(count: int, repeat_share: float, seed: int) -> list[str]:
    """``count`` sentences, ``repeat_share`` of them repeats of earlier ones, in a fixed shuffled order."""
    rng = random.Random(seed)
    sentences = [f"{s} {p}" for s in SUBJECTS for p in PREDICATES]
    rng.shuffle(sentences)
    fresh = round(count * (1 - repeat_share))
    # Past the natural sentences (the CPU run stays within them), a reference number keeps texts apart.
    segments = [
        sentences[i] if i < len(sentences) else f"{sentences[i % len(sentences)][:-1]} (ref. {i})."
        for i in range(fresh)
    ]
    position = {text: i for i, text in enumerate(segments)}
    # A repeat comes after its first occurrence somewhere: some while it is still in flight
    # (shared), most once it is stored (recalled).
    placed: list[tuple[float, str]] = [(float(i), text) for i, text in enumerate(segments)]
    for _ in range(count - fresh):
        text = rng.choice(segments)
        placed.append((rng.uniform(position[text] + 0.5, fresh), text))
    return [text for _, text in sorted(placed, key=lambda item: item[0])]


async def _pass(
    settings: Settings,
    urls: ServiceUrls,
    engine: TranslationEngine,
    profile: PromptProfile,
    segments: list[str],
    *,
    memory: bool,
    max_in_flight: int,
    model_path: Path | None = None,
) -> dict[str, Any]:
    """Queue the segments (a fresh key prefix), run one worker until every row is final; the figures."""
    pass_settings = settings.model_copy(
        update={"key_prefix": f"bench-{uuid.uuid4().hex[:8]}", "memory_enabled": memory}
    )
    with Client(pass_settings) as client:
        ids = await asyncio.to_thread(
            client.submit_many, (TranslationRequest(text, "en", "fr", lane="bulk") for text in segments)
        )
        worker = Worker(
            pass_settings,
            redis_url=urls.redis_url,
            database_url=urls.database_url,
            engine=engine,
            profile=profile,
            max_in_flight=max_in_flight,
            model_path=model_path,
        )
        started = time.perf_counter()
        await worker.start()
        try:
            await _wait_final(urls.database_url, ids)
            elapsed = time.perf_counter() - started
            jobs = await asyncio.to_thread(lambda: [client.get(i) for i in ids])
            await worker.memory.flush()
        finally:
            await worker.stop(grace_seconds=30)
    counters = worker.memory.counters
    return {
        "memory": memory,
        "segments": len(segments),
        "seconds": round(elapsed, 2),
        "jobs_per_s": round(len(segments) / elapsed, 2),
        "succeeded": sum(job.status is JobStatus.SUCCEEDED for job in jobs),
        "from_memory": sum(job.from_memory for job in jobs),
        "recalled": counters.hits,
        "shared_in_flight": counters.shared,
        "output_tokens": sum(job.output_tokens or 0 for job in jobs),
    }


async def _wait_final(database_url: str, ids: list[str]) -> None:
    """Until every job has its row (a row is only written once a job is final): one count per poll."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True) as conn:
        while True:
            cursor = await conn.execute("SELECT count(*) FROM jobs WHERE id = ANY(%s::uuid[])", (ids,))
            row = await cursor.fetchone()
            if row is not None and row[0] >= len(ids):
                return
            await asyncio.sleep(0.05)


async def _empty_memory(database_url: str) -> None:
    store = MemoryStore(database_url)
    await store.purge()
    await store.close()


async def side_by_side(
    settings: Settings,
    urls: ServiceUrls,
    engine: TranslationEngine,
    profile: PromptProfile,
    segments: list[str],
    rounds: int,
    max_in_flight: int,
) -> dict[str, Any]:
    """``rounds`` x (memory off, memory on from empty) on one engine; the median ratio."""
    passes: list[dict[str, Any]] = []
    for _ in range(rounds):
        for memory in (False, True):
            await _empty_memory(urls.database_url)
            result = await _pass(settings, urls, engine, profile, segments, memory=memory, max_in_flight=max_in_flight)
            print(json.dumps(result), file=sys.stderr)
            passes.append(result)
    off = [p["jobs_per_s"] for p in passes if not p["memory"]]
    on = [p["jobs_per_s"] for p in passes if p["memory"]]
    return {
        "passes": passes,
        "ratio_on_over_off_per_round": [round(b / a, 3) for a, b in zip(off, on, strict=True)],
        "ratio_on_over_off_median": round(statistics.median(b / a for a, b in zip(off, on, strict=True)), 3),
    }


async def stale_check(settings: Settings, urls: ServiceUrls, segments: list[str]) -> dict[str, Any]:
    """Model folder A stores; folder B (another revision) must find nothing; A again finds every text."""
    await _empty_memory(urls.database_url)
    engine = DeterministicEngine()
    profile = IdentityProfile(engine.tokenizer)
    unique = list(dict.fromkeys(segments))
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: Path(tmp) / name for name in ("A", "B")}
        for name, folder in folders.items():
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps({"revision": name}))
        runs = {}
        for label, folder in (("A", folders["A"]), ("B_after_A", folders["B"]), ("A_again", folders["A"])):
            runs[label] = await _pass(
                settings, urls, engine, profile, unique, memory=True, max_in_flight=64, model_path=folder
            )
    return {
        "texts": len(unique),
        "from_memory": {label: run["from_memory"] for label, run in runs.items()},
        "stale_hits": runs["B_after_A"]["from_memory"],
    }


async def measure(args: argparse.Namespace, urls: ServiceUrls) -> dict[str, Any]:
    """Every part the arguments ask for, on one event loop (the vLLM engine's output handler lives there)."""
    settings = Settings(redis_url=urls.redis_url, database_url=urls.database_url, metrics_enabled=False)
    segments = document_segments(args.segments, args.repeat_share, seed=7)
    report: dict[str, Any] = {
        "segments": len(segments),
        "distinct_texts": len(set(segments)),
        "repeat_share": args.repeat_share,
    }
    if args.engine in ("zero-cost", "both"):
        engine = DeterministicEngine()
        zero = document_segments(args.zero_cost_segments, args.repeat_share, seed=7)  # enough jobs to time
        report["zero_cost"] = await side_by_side(
            settings, urls, engine, IdentityProfile(engine.tokenizer), zero, args.rounds, 512
        )
        report["zero_cost"]["segments"] = len(zero)
    if args.engine in ("cpu", "both"):
        from worker.model import prepare_default_model
        from worker.vllm_engine import VllmEngine

        model = args.model or prepare_default_model(settings.model_cache_dir)
        started = time.perf_counter()
        engine_cpu = VllmEngine.start(model)  # dragoman's defaults
        report["cpu_engine_start_s"] = round(time.perf_counter() - started, 1)
        try:
            profile = choose_profile(None, model, engine_cpu.tokenizer)
            report["cpu_model"] = model.name
            report["cpu_profile"] = profile.name
            warm = document_segments(12, 0.0, seed=99)
            in_flight = 2 * engine_cpu.max_num_seqs
            await _pass(settings, urls, engine_cpu, profile, warm, memory=False, max_in_flight=in_flight)
            report["cpu"] = await side_by_side(settings, urls, engine_cpu, profile, segments, args.rounds, in_flight)
        finally:
            engine_cpu.shutdown()
    report["stale_check"] = await stale_check(settings, urls, segments)
    return report


def main() -> None:
    """Parse arguments, run, print and save the report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--engine", choices=["zero-cost", "cpu", "both"], default="both")
    parser.add_argument("--segments", type=int, default=160, help="segments of the document (default 160)")
    parser.add_argument("--repeat-share", type=float, default=0.3, help="share of segments that repeat (0.3)")
    parser.add_argument("--rounds", type=int, default=2, help="off/on pairs per engine (default 2)")
    parser.add_argument(
        "--zero-cost-segments", type=int, default=10_000, help="segments of the zero-cost engine's document"
    )
    parser.add_argument("--model", type=Path, help="model folder for the CPU engine (default: the default model)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/memory.json"))
    args = parser.parse_args()
    with benchmark_servers() as urls:
        report = run_event_loop(measure(args, urls))
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": "python -m bench.memory " + " ".join(sys.argv[1:]),
        **report,
    }
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
