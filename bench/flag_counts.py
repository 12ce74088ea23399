"""Quality flags in a run's progress: what the flag counts cost the progress query on a big run.

    python -m bench.flag_counts [--jobs 100000] [--rounds 15] [--out bench/results/issue34/flag-counts.json]

Against one embedded PostgreSQL (or DRAGOMAN_DATABASE_URL): one run of ``--jobs`` finished job rows
(95% succeeded, 4% failed, 1% cancelled; about 15% of the succeeded flagged, a third of those with
two flags, the rest clean ``{}``; the failed and cancelled unchecked ``NULL``), among as many rows of
another run, vacuumed and analysed.
Then, alternating round by round, the median time of:

- ``before``: the progress query's status counts as they were before issue 34 (status, count, first
  created, last finished, ``GROUP BY status``);
- ``flagged only``: the same with the flagged count but no count per flag;
- ``flags``: today's ``storage.runs.counts_sql``, the same pass with the flagged count and one
  ``count(*) FILTER (WHERE quality_flags ? flag)`` per flag;
- ``before + keys``: the other way, the old query plus a second one over ``jsonb_object_keys``;
- ``results page``: the first page (2,000 lines) of the run's results, every line against
  ``flagged=true`` (the flagged lines alone: they are 12% of the rows, so its page reaches further).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench.servers import benchmark_servers
from storage import libpq_url
from storage.runs import FLAGGED_SQL, RESULTS_PAGE_SQL, counts_sql, flag_counts

BEFORE_SQL = """
SELECT status, count(*), extract(epoch FROM min(created_at)), extract(epoch FROM max(finished_at))
FROM jobs WHERE run_id = %s GROUP BY status
"""
"""The progress query's status counts before issue 34 (main at 2d12ff8), for the comparison only."""
FLAGGED_ONLY_SQL = BEFORE_SQL.replace(" FROM jobs", f", count(*) FILTER (WHERE {FLAGGED_SQL}) FROM jobs")
KEYS_SQL = "SELECT key, count(*) FROM jobs, jsonb_object_keys(quality_flags) AS key WHERE run_id = %s GROUP BY key"

FILL_SQL = """
INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error, attempts,
                  created_at, started_at, finished_at, metadata, run_id, sequence, quality_flags, created_day)
SELECT gen_random_uuid(), s.status, 'en', 'fr', 'Line ' || n || ' of the benchmark run.',
       CASE WHEN s.status = 'succeeded' THEN 'Ligne ' || n || ' du banc.' END,
       CASE WHEN s.status <> 'succeeded' THEN 'boom' END, 1,
       now() - interval '1 hour' + n * interval '10 ms', now() - interval '1 hour' + n * interval '10 ms',
       now() - interval '1 hour' + n * interval '20 ms', jsonb_build_object('custom_id', 'c' || n), %s, n,
       CASE WHEN s.status <> 'succeeded' THEN NULL
            WHEN n %% 25 = 0 THEN '{"numbers": "source number 42 missing", "wrong_language": "output is en"}'::jsonb
            WHEN n %% 25 IN (1, 2) THEN '{"length_ratio": "output 3.1x the source"}'::jsonb
            WHEN n %% 50 = 3 THEN '{"glossary": "queue not rendered as file"}'::jsonb
            ELSE '{}'::jsonb END,
       ((now() - interval '1 hour' + n * interval '10 ms') AT TIME ZONE 'UTC')::date
FROM generate_series(0, %s - 1) AS n,
     LATERAL (SELECT CASE WHEN n %% 100 < 95 THEN 'succeeded' WHEN n %% 100 < 99 THEN 'failed'
                          ELSE 'cancelled' END AS status) AS s
"""


def _fill(conn: psycopg.Connection[Any], jobs: int) -> str:
    """The measured run's rows and as many of another run's; returns the measured run's id."""
    run_id = str(uuid.uuid4())
    for group in (run_id, str(uuid.uuid4())):
        conn.execute(
            "INSERT INTO runs (id, status, source_lang, target_lang, total, name) "
            "VALUES (%s, 'completed', 'en', 'fr', %s, 'bench')",
            (group, jobs),
        )
        conn.execute(FILL_SQL, (group, jobs))
    conn.execute("VACUUM ANALYZE jobs")
    return run_id


def _ms(conn: psycopg.Connection[Any], queries: list[tuple[str, tuple[Any, ...]]]) -> tuple[float, int]:
    """Milliseconds to run ``queries`` one after the other and fetch every row; the rows fetched."""
    started = time.perf_counter()
    rows = 0
    for query, params in queries:
        rows += len(conn.execute(query, params).fetchall())
    return 1_000 * (time.perf_counter() - started), rows


def bench(conn: psycopg.Connection[Any], run_id: str, rounds: int) -> dict[str, Any]:
    """Median ms of each query, alternating round by round (after one warm-up of each)."""
    page = 2_000
    cases: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
        "before": [(BEFORE_SQL, (run_id,))],
        "flagged only": [(FLAGGED_ONLY_SQL, (run_id,))],
        "flags": [(counts_sql("run_id"), (run_id,))],
        "before + keys": [(BEFORE_SQL, (run_id,)), (KEYS_SQL, (run_id,))],
        "results page, every line": [(RESULTS_PAGE_SQL.format(flagged=""), (run_id, -1, page))],
        "results page, flagged=true": [(RESULTS_PAGE_SQL.format(flagged=f" AND {FLAGGED_SQL}"), (run_id, -1, page))],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for queries in cases.values():
        _ms(conn, queries)  # warm the cache and the plan
    for _ in range(rounds):
        for name, queries in cases.items():
            times[name].append(_ms(conn, queries)[0])
    flagged, per_flag = flag_counts(conn.execute(counts_sql("run_id"), (run_id,)).fetchall())
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "median_ms": {name: round(value, 2) for name, value in median.items()},
        "min_ms": {name: round(min(values), 2) for name, values in times.items()},
        "ratio_vs_before": {
            name: round(median[name] / median["before"], 3) for name in ("flagged only", "flags", "before + keys")
        },
        "flagged": flagged,
        "flags": per_flag,
    }


def main() -> None:
    """Fill, measure, print and optionally write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="job rows of the measured run")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds (medians over them)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    with benchmark_servers() as urls, psycopg.connect(libpq_url(urls.database_url), autocommit=True) as conn:
        started = time.perf_counter()
        run_id = _fill(conn, args.jobs)
        filled_s = time.perf_counter() - started
        results = bench(conn, run_id, args.rounds)
    report = {
        "benchmark": "flag_counts",
        "jobs": args.jobs,
        "rounds": args.rounds,
        "fill_seconds": round(filled_s, 1),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        **results,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
