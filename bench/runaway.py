"""Runaway generations: 200 jobs of random English words through a real ``dragoman worker``, before and after.

    python -m bench.runaway --label after --out bench/results/runaway-after.json
    python -m bench.runaway --label before --checkout /work/wt-before --out bench/results/runaway-before.json

Issue 34's workload: ``--jobs`` texts of 3-40 words drawn (seeded) from ``bench/samples/english-words.txt``
(the English msgids of this machine's French gettext catalogs, words seen at least four times), no
sentence structure, en->fr. A ``dragoman worker`` subprocess with the default model and default
settings (the translation memory off, so every job reaches the engine) runs from ``--checkout``
(another commit's tree, for the before run) or this tree. After one warm-up job (the engine is
up), every job is submitted at once and the drain is timed from the submit to the last final row.

Reported: vLLM's generated tokens over the drain (the worker's ``/metrics``, every request
counted, retries included) and the rows' output tokens; the drain's wall time and the sum of the
jobs' run seconds (started to finished, overlapping); how each job ended (status x finish reason x
error kind, the error's text before its first colon); and per failed job, the tokens its row records
over its first budget (``16 + ceil(2 x 1.0 x source tokens)``, the translator's first-budget rule for
en->fr, computed here with the default model's prompt profile). A failed row records every try's
tokens after this branch, only the last try's before it (the before run's ratios miss its first
budget's tokens). ``--summarise`` recomputes the row figures of a saved run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from bench.servers import benchmark_servers
from contract.schemas import Job, TranslationRequest
from contract.settings import Settings
from producer import Client

WORDS = Path(__file__).resolve().parent / "samples" / "english-words.txt"
_FINAL = {"succeeded", "failed", "cancelled"}


def random_texts(jobs: int, seed: int, min_words: int = 3, max_words: int = 40) -> list[str]:
    """``jobs`` texts of ``min_words``-``max_words`` words drawn with ``random.Random(seed)``."""
    words = WORDS.read_text(encoding="utf-8").split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(min_words, max_words))) for _ in range(jobs)]


def _metric(port: int, name: str) -> float | None:
    """The sum of a counter's samples on the worker's ``/metrics``, or None if it is not there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
    except OSError:
        return None
    values = [float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(name)]
    return sum(values) if values else None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _first_budget(texts: list[str]) -> list[int]:
    """Each text's first output budget by the translator's rule for en->fr: the default model's prompt
    profile, ``16 + ceil(2.0 x expansion ratio x (prompt tokens - the profile's own tokens))``."""
    from bench.engines import load_tokenizer
    from contract.expansion import expansion_ratio
    from contract.schemas import JobSpec
    from worker.model import default_model_path  # the default model's tokenizer and profile, no engine
    from worker.profiles import choose_profile

    path = default_model_path(Settings().model_cache_dir)
    profile = choose_profile(None, path, load_tokenizer(path))
    ratio = 2.0 * expansion_ratio("en", "fr")
    overhead = len(
        profile.prompt_token_ids(JobSpec(job_id="-", text="", source_lang="en", target_lang="fr", created_at=0.0))
    )
    budgets = []
    for text in texts:
        spec = JobSpec(job_id="-", text=text, source_lang="en", target_lang="fr", created_at=0.0)
        budgets.append(16 + math.ceil(ratio * max(1, len(profile.prompt_token_ids(spec)) - overhead)))
    return budgets


def _ended(job: Job) -> str:
    kind = (job.error or "").split(":", 1)[0] if job.error else "-"
    return f"{job.status.value} / {job.finish_reason} / {kind}"


def measure(jobs: int, seed: int, checkout: Path | None, log: Path, timeout_s: float) -> dict[str, Any]:
    """Run the workload once; the figures the module docstring lists."""
    texts = random_texts(jobs, seed)
    port = _free_port()
    with benchmark_servers() as urls:
        env = {
            **os.environ,
            "DRAGOMAN_REDIS_URL": urls.redis_url,
            "DRAGOMAN_DATABASE_URL": urls.database_url,
            "DRAGOMAN_MEMORY_ENABLED": "false",
            "DRAGOMAN_METRICS_PORT": str(port),
            "DRAGOMAN_METRICS_HOST": "127.0.0.1",
        }
        if checkout is not None:
            env["PYTHONPATH"] = str(checkout)
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "worker"],
                env=env,
                cwd=checkout,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            with Client(Settings(memory_enabled=False), redis_url=urls.redis_url, database_url=urls.database_url) as c:
                warm = c.wait(c.submit("Good morning.", "en", "fr"), timeout=900)
                assert warm.status.value == "succeeded", warm
                tokens_before = _metric(port, "vllm:generation_tokens_total")
                start = time.perf_counter()
                ids = c.submit_many([TranslationRequest(t, "en", "fr") for t in texts])
                pending = set(ids)
                rows: dict[str, Job] = {}
                while pending and time.perf_counter() - start < timeout_s:
                    for job_id in list(pending):
                        job = c.get(job_id)
                        if job.status.value in _FINAL:
                            rows[job_id] = job
                            pending.discard(job_id)
                    time.sleep(1.0)
                drain_s = time.perf_counter() - start
                tokens_after = _metric(port, "vllm:generation_tokens_total")
                for job_id in pending:
                    rows[job_id] = c.get(job_id)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    ordered = [rows[i] for i in ids]
    log.with_suffix(".rows.json").write_text(json.dumps([job.model_dump(mode="json") for job in ordered]) + "\n")
    return {
        "jobs": jobs,
        "seed": seed,
        "checkout": str(checkout) if checkout else "this tree",
        "unfinished": len(pending),
        "generated_tokens": None
        if tokens_before is None or tokens_after is None
        else int(tokens_after - tokens_before),
        "drain_s": round(drain_s, 1),
    } | summarise(ordered)


def summarise(ordered: list[Job]) -> dict[str, Any]:
    """The rows' figures: output tokens, run seconds, how each job ended, failed jobs against their first budget."""
    budgets = _first_budget([job.text or "" for job in ordered])
    failed = [(job, budget) for job, budget in zip(ordered, budgets, strict=True) if job.status.value == "failed"]
    ratios = sorted(((job.output_tokens or 0) / budget for job, budget in failed), reverse=True)
    run_seconds = [job.run_seconds for job in ordered if job.run_seconds is not None]
    return {
        "row_output_tokens": sum(job.output_tokens or 0 for job in ordered),
        "sum_run_seconds": round(sum(run_seconds), 1),
        "ended": dict(Counter(_ended(job) for job in ordered).most_common()),
        "first_budget_tokens": sum(budgets),
        "failed_worst_output_over_first_budget": round(ratios[0], 2) if ratios else None,
        "failed_output_over_first_budget": [round(r, 2) for r in ratios],
        "failed": [
            {"text": job.text, "first_budget": budget, "output_tokens": job.output_tokens, "error": job.error}
            for job, budget in failed
        ],
    }


def main() -> None:
    """Run once and print and write the result."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--label", default="after")
    parser.add_argument("--checkout", type=Path, default=None, help="run the worker from this source tree")
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up on the drain after this many seconds")
    parser.add_argument("--out", type=Path, default=Path("bench/results/runaway.json"))
    parser.add_argument(
        "--summarise", action="store_true", help="recompute --out's row figures from its saved rows, no run"
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.summarise:
        saved = json.loads(args.out.with_suffix(".worker.rows.json").read_text(encoding="utf-8"))
        result = json.loads(args.out.read_text(encoding="utf-8")) | summarise([Job.model_validate(r) for r in saved])
    else:
        result = {"label": args.label} | measure(
            args.jobs, args.seed, args.checkout, args.out.with_suffix(".worker.log"), args.timeout
        )
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for key in ("generated_tokens", "row_output_tokens", "drain_s", "sum_run_seconds", "unfinished"):
        print(f"{key:28} {result[key]}")
    print(f"{'worst failed/first budget':28} {result['failed_worst_output_over_first_budget']}")
    for ended, count in result["ended"].items():
        print(f"  {count:4}  {ended}")


if __name__ == "__main__":
    main()
