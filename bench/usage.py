"""Usage per tenant: what counting costs the writer, and what reading it costs, rollup table against an index.

    python -m bench.usage [--rows 200000] [--rounds 8] [--out bench/out/usage.json]

Against one embedded PostgreSQL (or DRAGOMAN_DATABASE_URL), on one connection, like the writer:

1. write: writer batches of 256 rows of API jobs finished the same day (20 tenants, 2 models,
   1 in 20 failed, texts of the seed's workload: 80 usage keys per batch), the time per batch of three
   statements (medians; ``before`` and ``rollup`` alternate batch by batch): ``before``, the upsert
   as it was before issue 33 (``jobs`` only); ``rollup``, today's ``UPSERT_SQL`` (the same upsert
   plus ``usage_daily`` in the same statement); ``index``, the old upsert with an index on
   ``jobs (tenant, finished_at)``, the other way to make usage cheap to read (created for its rounds,
   dropped after).
2. read: one tenant's usage over 30 days by day and model, once ``--rows`` jobs spread over 30 days
   are stored: the usage store's query on ``usage_daily``, against the same sums computed from
   ``jobs`` with the index (median of 5 each).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from bench.enqueue import workload
from bench.servers import benchmark_servers
from storage import RowRecord, libpq_url
from storage.jobs import UPSERT_SQL
from storage.usage import usage_sql

TENANTS = [f"bench-tenant-{i:02d}" for i in range(20)]
MODELS = ("bench-a", "bench-b")
BATCH = 256
DAY0 = dt.datetime(2031, 1, 1, tzinfo=dt.UTC).timestamp()

# The writer's statement before issue 33 (commit 0c960c4), for the comparison only.
BEFORE_SQL = """
INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error,
                  attempts, model, prompt_tokens, output_tokens, created_at, started_at,
                  finished_at, metadata, run_id, document_id, sequence, tenant, finish_reason,
                  pieces, detected_source_lang, glossary_misses, from_memory, inline_tags, created_day)
SELECT u.id, u.status, u.source_lang, u.target_lang, u.source_text, u.translated_text, u.error,
       u.attempts, u.model, u.prompt_tokens, u.output_tokens, to_timestamp(u.created_at),
       to_timestamp(u.started_at), to_timestamp(u.finished_at), u.metadata, u.run_id,
       u.document_id, u.sequence, u.tenant, u.finish_reason, u.pieces, u.detected_source_lang,
       u.glossary_misses, coalesce(u.from_memory, false), u.inline_tags,
       jobs_created_day(u.id, to_timestamp(u.created_at))
FROM json_to_recordset(%s::json)
     AS u(id uuid, status text, source_lang text, target_lang text, source_text text,
          translated_text text, error text, attempts int, model text, prompt_tokens int,
          output_tokens int, created_at float8, started_at float8, finished_at float8,
          metadata jsonb, run_id uuid, document_id uuid, sequence int, tenant text,
          finish_reason text, pieces int, detected_source_lang text, glossary_misses jsonb,
          from_memory boolean, inline_tags text)
ON CONFLICT (id, created_day) DO UPDATE SET
    status = EXCLUDED.status,
    translated_text = EXCLUDED.translated_text,
    error = EXCLUDED.error,
    attempts = GREATEST(jobs.attempts, EXCLUDED.attempts),
    model = EXCLUDED.model,
    prompt_tokens = EXCLUDED.prompt_tokens,
    output_tokens = EXCLUDED.output_tokens,
    started_at = EXCLUDED.started_at,
    finished_at = EXCLUDED.finished_at,
    finish_reason = EXCLUDED.finish_reason,
    pieces = EXCLUDED.pieces,
    detected_source_lang = EXCLUDED.detected_source_lang,
    glossary_misses = EXCLUDED.glossary_misses,
    from_memory = EXCLUDED.from_memory,
    inline_tags = EXCLUDED.inline_tags
WHERE jobs.status NOT IN ('succeeded', 'cancelled')
RETURNING id::text
"""
INDEX_SQL = "CREATE INDEX bench_jobs_tenant_finished ON jobs (tenant, finished_at) WHERE tenant IS NOT NULL"
DROP_INDEX_SQL = "DROP INDEX IF EXISTS bench_jobs_tenant_finished"
FROM_JOBS_SQL = """
SELECT tenant, (finished_at AT TIME ZONE 'UTC')::date, model, count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'cancelled'),
       sum(char_length(source_text)), sum(char_length(source_text)) FILTER (WHERE status = 'succeeded'),
       sum(prompt_tokens), sum(output_tokens)
FROM jobs WHERE tenant = %s AND finished_at >= %s AND finished_at < %s
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""

_encode = msgspec.json.Encoder().encode


def _batches(count: int, texts: list[str], days: int) -> list[bytes]:
    """``count`` writer batches as the writer encodes them, finished over ``days`` days."""
    out = []
    n = 0
    for _ in range(count):
        records = []
        for _ in range(BATCH):
            text = texts[n % len(texts)]
            at = DAY0 + (n % days) * 86_400 + 3_600
            records.append(
                RowRecord(
                    str(uuid.uuid4()), "succeeded" if n % 20 else "failed", "en", "fr", text, text, None, 1,
                    MODELS[n % 2], 40, 45, at - 2, at - 1, at, {}, None, None, None, tenant=TENANTS[n % len(TENANTS)],
                )
            )  # fmt: skip
            n += 1
        out.append(_encode(records))
    return out


def _write(conn: psycopg.Connection[Any], statement: str, batches: list[bytes]) -> float:
    """Rows per second writing ``batches`` with ``statement``, one transaction each."""
    begin = time.perf_counter()
    for payload in batches:
        with conn.transaction():
            conn.execute(statement, (payload.decode(),), binary=True).fetchall()
    return len(batches) * BATCH / (time.perf_counter() - begin)


def _one(conn: psycopg.Connection[Any], statement: str, payload: bytes) -> float:
    begin = time.perf_counter()
    with conn.transaction():
        conn.execute(statement, (payload.decode(),), binary=True).fetchall()
    return time.perf_counter() - begin


def bench_write(conn: psycopg.Connection[Any], rounds: int, batches_per_round: int, texts: list[str]) -> dict[str, Any]:
    """Seconds per writer batch: ``before`` and ``rollup`` alternating batch by batch (the machine's noise
    hits both alike), then ``index`` in rounds of ``batches_per_round`` with the index, alternating with
    rounds of ``before`` without it; medians. Every batch writes new rows."""
    _write(conn, UPSERT_SQL, _batches(batches_per_round, texts, 1))  # warm-up
    seconds: dict[str, list[float]] = {"before": [], "rollup": []}
    for i, payload in enumerate(_batches(2 * rounds * batches_per_round, texts, 1)):
        name = "before" if (i // 2 + i) % 2 else "rollup"  # ABBA: neither always goes first
        seconds[name].append(_one(conn, BEFORE_SQL if name == "before" else UPSERT_SQL, payload))
    index_rates: dict[str, list[float]] = {"before": [], "index": []}
    for _ in range(rounds):
        index_rates["before"].append(_write(conn, BEFORE_SQL, _batches(batches_per_round, texts, 1)))
        conn.execute(INDEX_SQL)
        index_rates["index"].append(_write(conn, BEFORE_SQL, _batches(batches_per_round, texts, 1)))
        conn.execute(DROP_INDEX_SQL)
    per_batch_ms = {name: round(statistics.median(values) * 1000, 2) for name, values in seconds.items()}
    index_medians = {name: round(statistics.median(values)) for name, values in index_rates.items()}
    return {
        "batch": BATCH,
        "batches_each": len(seconds["before"]),
        "per_batch_ms_median": per_batch_ms,
        "rows_per_s": {name: round(BATCH / (ms / 1000)) for name, ms in per_batch_ms.items()},
        "rollup_vs_before": round(per_batch_ms["before"] / per_batch_ms["rollup"], 3),
        "index_rounds_rows_per_s_median": index_medians,
        "index_vs_before": round(index_medians["index"] / index_medians["before"], 3),
    }


def _median_ms(conn: psycopg.Connection[Any], statement: str, params: tuple[Any, ...]) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(5):
        begin = time.perf_counter()
        rows = len(conn.execute(statement, params).fetchall())
        times.append((time.perf_counter() - begin) * 1000)
    return round(statistics.median(times), 2), rows


def bench_read(conn: psycopg.Connection[Any], rows: int, texts: list[str]) -> dict[str, Any]:
    """One tenant's 30 days by day and model: from ``usage_daily`` and from ``jobs`` (with the index)."""
    for payload in _batches(rows // BATCH, texts, 30):
        with conn.transaction():
            conn.execute(UPSERT_SQL, (payload.decode(),), binary=True).fetchall()
    conn.execute(INDEX_SQL)
    conn.execute("ANALYZE jobs")
    conn.execute("ANALYZE usage_daily")
    first = dt.datetime.fromtimestamp(DAY0, dt.UTC)
    start, end = first.date(), (first + dt.timedelta(days=29)).date()
    rollup_ms, rollup_rows = _median_ms(conn, usage_sql(("day", "model"), True), (start, end, TENANTS[0]))
    jobs_ms, jobs_rows = _median_ms(conn, FROM_JOBS_SQL, (TENANTS[0], first, first + dt.timedelta(days=30)))
    conn.execute(DROP_INDEX_SQL)
    assert rollup_rows == jobs_rows, (rollup_rows, jobs_rows)
    stored = conn.execute("SELECT count(*) FROM jobs").fetchone()
    return {
        "jobs_stored": stored[0] if stored else None,
        "tenant_jobs": rows // len(TENANTS),
        "groups": rollup_rows,
        "usage_daily_ms": rollup_ms,
        "jobs_with_index_ms": jobs_ms,
        "speedup": round(jobs_ms / rollup_ms, 1) if rollup_ms else None,
    }


def _create_days(database_url: str) -> None:
    """The jobs table's partitions of the benchmark's 30 days (migration 0022; the worker's writer makes its own)."""
    from contract.sync_bridge import run_sync
    from storage.connection import AsyncPostgresConnection
    from storage.partitions import create_partitions

    async def create() -> None:
        connection = AsyncPostgresConnection(database_url)
        first = dt.datetime.fromtimestamp(DAY0, dt.UTC).date()
        try:
            await create_partitions(await connection.get(), [first + dt.timedelta(days=n) for n in range(31)])
        finally:
            await connection.close()

    run_sync(create())


def main() -> None:
    """Run both measurements once, print them, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batches-per-round", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("bench/out/usage.json"))
    args = parser.parse_args()
    texts = [item.text for item in workload(2_000)]
    with benchmark_servers() as urls, psycopg.connect(libpq_url(urls.database_url), autocommit=True) as conn:
        _create_days(urls.database_url)
        result: dict[str, Any] = {
            "write": bench_write(conn, args.rounds, args.batches_per_round, texts),
            "read": bench_read(conn, args.rows, texts),
        }
        conn.execute("DELETE FROM jobs WHERE tenant LIKE 'bench-tenant-%%'")
        conn.execute("DELETE FROM usage_daily WHERE tenant LIKE 'bench-tenant-%%'")
    result["machine"] = {"python": platform.python_version(), "cpus": __import__("os").cpu_count()}
    result["command"] = f"python -m bench.usage --rows {args.rows} --rounds {args.rounds}"
    w, r = result["write"], result["read"]
    print(f"write, ms per batch of {w['batch']} (median of {w['batches_each']} each): {w['per_batch_ms_median']}")
    print(f"  rollup/before {w['rollup_vs_before']} (throughput), index/before {w['index_vs_before']}")
    print(
        f"read one tenant's 30 days by day and model ({r['tenant_jobs']:,} of {r['jobs_stored']:,} jobs): "
        f"usage_daily {r['usage_daily_ms']} ms, jobs with an index {r['jobs_with_index_ms']} ms"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
