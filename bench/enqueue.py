"""Producer enqueue rate: ``submit_many`` (pipelined) and ``submit`` (one round trip each).

Runs against the embedded Redis and PostgreSQL in a temporary folder, or the servers at
``DRAGOMAN_REDIS_URL`` / ``DRAGOMAN_DATABASE_URL``. Prints a table and writes JSON.

    python -m bench.enqueue [--jobs 100000] [--single 5000] [--out bench/out/enqueue.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from bench.servers import benchmark_servers
from contract.schemas import TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client

WORDS = (
    "the quick brown fox jumps over a lazy dog while our team ships the new release to every "
    "customer before the end of the quarter"
).split()


def workload(count: int, seed: int = 1) -> list[TranslationRequest]:
    """Texts of 10-200 words with a little metadata, fixed seed."""
    rng = random.Random(seed)
    return [
        TranslationRequest(" ".join(rng.choices(WORDS, k=rng.randint(10, 200))), "en", "fr", metadata={"n": i})
        for i in range(count)
    ]


def measure(urls: ServiceUrls, jobs: int, single: int) -> dict[str, Any]:
    """Enqueue ``jobs`` with submit_many and ``single`` with submit; return rates."""
    settings = Settings(
        redis_url=urls.redis_url, database_url=urls.database_url, key_prefix=f"bench-{uuid.uuid4().hex[:8]}"
    )
    items = workload(jobs)
    with Client(settings) as client, redis.Redis.from_url(urls.redis_url, decode_responses=True) as raw:
        start = time.perf_counter()
        ids = client.submit_many(items)
        many_s = time.perf_counter() - start
        assert len(ids) == jobs == raw.xlen(client.keys.jobs_stream)

        start = time.perf_counter()
        for item in items[:single]:
            client.submit(item.text, item.source_lang, item.target_lang, metadata=item.metadata)
        single_s = time.perf_counter() - start
        raw.delete(client.keys.jobs_stream)
        for key in raw.scan_iter(match=client.keys.state_pattern, count=10_000):
            raw.unlink(key)
    return {
        "submit_many_jobs": jobs,
        "submit_many_seconds": round(many_s, 3),
        "submit_many_jobs_per_s": round(jobs / many_s),
        "submit_jobs": single,
        "submit_seconds": round(single_s, 3),
        "submit_jobs_per_s": round(single / single_s),
        "chunk_size": settings.submit_chunk_size,
    }


def main() -> None:
    """Run the benchmark and write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--single", type=int, default=5_000)
    parser.add_argument("--out", type=Path, default=Path("bench/out/enqueue.json"))
    args = parser.parse_args()

    with benchmark_servers() as urls:
        result = measure(urls, args.jobs, args.single)
    result |= {"python": platform.python_version(), "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d %H:%M")}
    print(
        f"submit_many: {result['submit_many_jobs']:,} jobs in {result['submit_many_seconds']} s "
        f"= {result['submit_many_jobs_per_s']:,} jobs/s"
    )
    print(
        f"submit:      {result['submit_jobs']:,} jobs in {result['submit_seconds']} s "
        f"= {result['submit_jobs_per_s']:,} jobs/s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
