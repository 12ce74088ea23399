"""The partitioned ``jobs`` table (migration 0022) against the plain one it replaced, side by side in one run.

1. Lookups by id: ``EXPLAIN (ANALYZE, BUFFERS)`` of ``JobStore.get``'s statement for a v7 id (pruned to
   its day's partition: one index probe) and for a non-v7 id (one probe per partition), and the time of
   ``--lookups`` lookups each way, against the same rows in a plain table (the schema at 0021, keyed
   by ``id``), in alternating rounds.
2. Writes: rows/s of the worker's batched upsert (``storage.jobs.UPSERT_SQL``, batches of 256 as in
   ``bench.pipeline``'s raw PostgreSQL line) into the partitioned table, against the statement of
   0021 (``ON CONFLICT (id)``, ``xmax`` telling an overwritten row) into the plain table, batch by
   batch alternating (the machine's noise hits both alike).

Both databases live on one server: ``--days`` daily partitions of ``--rows-per-day`` rows each (one in
``--v4-every`` of them with a uuid4 id, as rows from before v7 ids), the same rows in each database.

    python -m bench.partitions --days 30 --rows-per-day 20000 --lookups 10000
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec
import psycopg

from bench.servers import benchmark_servers
from contract.ids import new_job_id
from storage import RowRecord, libpq_url, upgrade_database
from storage.connection import create_database
from storage.jobs import _GET_ANY_DAY_SQL, _GET_DAY_SQL, UPSERT_SQL, get_day_sql
from storage.partitions import create_partitions, job_day, partition_name

BATCH = 256  # bench.pipeline's raw PostgreSQL line
PLAIN_GET_SQL = _GET_ANY_DAY_SQL  # the same text: on the plain table it is the statement of 0021
PARENT_GET_SQL = _GET_ANY_DAY_SQL + " AND created_day = %s"  # a v7 lookup through the parent (pruned)

# The writer's statement of migration 0021 (main at 19b9fa5), for the comparison only.
PLAIN_UPSERT_SQL = """
WITH u AS MATERIALIZED (
    SELECT * FROM json_to_recordset(%s::json)
         AS r(id uuid, status text, source_lang text, target_lang text, source_text text,
              translated_text text, error text, attempts int, model text, prompt_tokens int,
              output_tokens int, created_at float8, started_at float8, finished_at float8,
              metadata jsonb, run_id uuid, document_id uuid, sequence int, tenant text,
              finish_reason text, pieces int, detected_source_lang text, glossary_misses jsonb,
              from_memory boolean, inline_tags text, quality_flags jsonb, controls jsonb)
),
prior AS (
    SELECT j.id, j.tenant, j.model, j.status, j.finished_at, char_length(j.source_text) AS characters,
           j.prompt_tokens, j.output_tokens
    FROM jobs j
    WHERE j.id IN (SELECT id FROM u) AND j.status NOT IN ('succeeded', 'cancelled')
),
written AS (
INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error,
                  attempts, model, prompt_tokens, output_tokens, created_at, started_at,
                  finished_at, metadata, run_id, document_id, sequence, tenant, finish_reason,
                  pieces, detected_source_lang, glossary_misses, from_memory, inline_tags,
                  quality_flags, controls)
SELECT u.id, u.status, u.source_lang, u.target_lang, u.source_text, u.translated_text, u.error,
       u.attempts, u.model, u.prompt_tokens, u.output_tokens, to_timestamp(u.created_at),
       to_timestamp(u.started_at), to_timestamp(u.finished_at), u.metadata, u.run_id,
       u.document_id, u.sequence, u.tenant, u.finish_reason, u.pieces, u.detected_source_lang,
       u.glossary_misses, coalesce(u.from_memory, false), u.inline_tags, u.quality_flags, u.controls
FROM u
ON CONFLICT (id) DO UPDATE SET
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
    inline_tags = EXCLUDED.inline_tags,
    quality_flags = EXCLUDED.quality_flags
WHERE jobs.status NOT IN ('succeeded', 'cancelled')
RETURNING jobs.id, jobs.tenant, jobs.model, jobs.status, jobs.finished_at,
          char_length(jobs.source_text) AS characters, jobs.prompt_tokens, jobs.output_tokens,
          jobs.xmax <> 0 AS overwritten
),
counted AS (
    SELECT tenant, model, status, finished_at, characters, prompt_tokens, output_tokens, 1 AS sign FROM written
    UNION ALL
    SELECT tenant, model, status, finished_at, characters, prompt_tokens, output_tokens, -1 FROM prior
    WHERE id IN (SELECT id FROM written WHERE overwritten)
),
summed AS (
INSERT INTO usage_daily AS d (tenant, day, model, status, jobs, characters, prompt_tokens, output_tokens)
SELECT coalesce(tenant, ''), (finished_at AT TIME ZONE 'UTC')::date, coalesce(model, ''), status,
       sum(sign), sum(sign * characters), sum(sign * coalesce(prompt_tokens, 0)),
       sum(sign * coalesce(output_tokens, 0))
FROM counted
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
ON CONFLICT (tenant, day, model, status) DO UPDATE SET
    jobs = d.jobs + EXCLUDED.jobs,
    characters = d.characters + EXCLUDED.characters,
    prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
    output_tokens = d.output_tokens + EXCLUDED.output_tokens
)
SELECT id::text FROM written
"""


# One day's rows, made by the server (the same md5-derived ids in both databases): a v7 id of that
# day's timestamp, or one in ``v4_every`` a uuid4-shaped id; texts of about a segment's length.
FILL_SQL = """
INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, attempts, model,
                  prompt_tokens, output_tokens, created_at, started_at, finished_at, metadata{day_column})
SELECT x.id, 'succeeded', 'en', 'fr', 'Segment ' || n || ' of the partitioned benchmark, a sentence long.',
       'Segment ' || n || ' du banc partitionne, une phrase.', 1, 'bench', 20, 22, x.at, x.at, x.at,
       '{{}}'::jsonb{day_value}
FROM generate_series(0, %(rows)s - 1) AS n,
     LATERAL (SELECT md5(%(day)s::text || ':' || n) AS h,
                     (%(day)s::date::timestamp AT TIME ZONE 'UTC')
                     + n * (interval '86399 seconds' / %(rows)s) AS at) AS m,
     LATERAL (SELECT CASE WHEN n %% %(v4_every)s = 0
                  THEN (substr(m.h, 1, 12) || '4' || substr(m.h, 14, 3) || '8' || substr(m.h, 18, 15))::uuid
                  ELSE (lpad(to_hex((extract(epoch FROM m.at) * 1000)::bigint), 12, '0') || '7'
                        || substr(m.h, 1, 3) || '8' || substr(m.h, 4, 15))::uuid END AS id,
                  m.at) AS x
"""


def _database(url: str, name: str) -> str:
    parts = urlsplit(libpq_url(url))
    return urlunsplit(parts._replace(path=f"/{name}"))


def _fill(url: str, partitioned: bool, days: list[dt.date], rows: int, v4_every: int) -> None:
    statement = FILL_SQL.format(
        day_column=", created_day" if partitioned else "",
        day_value=", jobs_created_day(x.id, x.at)" if partitioned else "",
    )
    with psycopg.connect(url, autocommit=True) as conn:
        for day in days:
            conn.execute(statement, {"rows": rows, "day": day, "v4_every": v4_every})
        conn.execute("VACUUM ANALYZE jobs")


def _sample(url: str, count: int, v4: bool) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        version = "4" if v4 else "7"
        cursor = conn.execute(
            "SELECT id::text FROM jobs WHERE substr(id::text, 15, 1) = %s ORDER BY random() LIMIT %s", (version, count)
        )
        return [row[0] for row in cursor.fetchall()]


def _explain(url: str, statement: str, params: tuple[Any, ...]) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + statement, params)
        return "\n".join(row[0] for row in cursor.fetchall())


BY_PARTITION = "by partition"  # the statement of ``JobStore.get``: the id's day partition read by name


async def _lookups(url: str, statement: str, params: list[tuple[Any, ...]]) -> float:
    """Seconds for ``params``' lookups one after another on one connection (as ``JobStore.get`` makes them)."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        begin = time.perf_counter()
        for values in params:
            if statement == BY_PARTITION:
                cursor = await conn.execute(get_day_sql(values[1]), values[:1])
            else:
                cursor = await conn.execute(statement, values)
            if await cursor.fetchone() is None:
                raise AssertionError(f"{values} not found")
        return time.perf_counter() - begin
    finally:
        await conn.close()


# The same lookups timed inside the server (no client round trip, no client process competing for the
# CPU): each statement planned with its values (EXECUTE ... USING, as psycopg's first executions).
SERVER_LOOP_SQL = """
CREATE FUNCTION pg_temp.lookups(statement text, ids uuid[], days date[], by_partition boolean)
RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    began timestamptz := clock_timestamp();
    found int := 0;
    hits int;
    hit record;
BEGIN
    FOR i IN 1 .. cardinality(ids) LOOP
        IF by_partition THEN
            EXECUTE format(statement, 'jobs_d' || to_char(days[i], 'YYYYMMDD')) INTO hit USING ids[i];
        ELSIF days IS NULL THEN
            EXECUTE statement INTO hit USING ids[i];
        ELSE
            EXECUTE statement INTO hit USING ids[i], days[i];
        END IF;
        GET DIAGNOSTICS hits = ROW_COUNT;  -- EXECUTE leaves FOUND alone
        found := found + hits;
    END LOOP;
    IF found <> cardinality(ids) THEN
        RAISE EXCEPTION 'found % of % rows', found, cardinality(ids);
    END IF;
    RETURN extract(epoch FROM clock_timestamp() - began) * 1e6 / cardinality(ids);
END
$$
"""


def _server_us(url: str, statement: str, ids: list[str], days: list[Any] | None) -> float:
    """Microseconds per lookup of ``ids`` by ``statement`` timed inside the server."""
    by_partition = statement == BY_PARTITION
    if by_partition:
        statement = _GET_DAY_SQL.replace("{partition}", "%I")
    numbered = statement.replace("%s", "$1", 1).replace("%s", "$2", 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SERVER_LOOP_SQL)
        row = conn.execute(
            "SELECT pg_temp.lookups(%s, %s::uuid[], %s::date[], %s)", (numbered, ids, days, by_partition)
        ).fetchone()
        return round(float(row[0]), 1) if row else float("nan")


def bench_lookups(partitioned: str, plain: str, lookups: int, rounds: int) -> dict[str, Any]:
    """Lookups by id, v7 and uuid4, partitioned and plain, in alternating rounds; microseconds per lookup."""
    v7, v4 = _sample(partitioned, lookups, v4=False), _sample(partitioned, lookups, v4=True)
    cases: dict[str, tuple[str, str, list[tuple[Any, ...]]]] = {
        "partitioned_v7_by_partition": (partitioned, BY_PARTITION, [(i, job_day(i)) for i in v7]),
        "partitioned_v7_through_parent": (partitioned, PARENT_GET_SQL, [(i, job_day(i)) for i in v7]),
        "partitioned_non_v7": (partitioned, _GET_ANY_DAY_SQL, [(i,) for i in v4]),
        "plain_v7_ids": (plain, PLAIN_GET_SQL, [(i,) for i in v7]),
        "plain_non_v7_ids": (plain, PLAIN_GET_SQL, [(i,) for i in v4]),
    }
    seconds: dict[str, float] = dict.fromkeys(cases, 0.0)
    per_round = -(-lookups // rounds)
    for r in range(rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in order:
            url, statement, params = cases[name]
            seconds[name] += asyncio.run(_lookups(url, statement, params[r * per_round : (r + 1) * per_round]))
    server: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in order:
            url, statement, params = cases[name]
            part = params[r * per_round : (r + 1) * per_round]
            days = [values[1] for values in part] if len(part[0]) == 2 else None
            server[name].append(_server_us(url, statement, [values[0] for values in part], days))
    result: dict[str, Any] = {
        "lookups_each": {name: len(cases[name][2]) for name in cases},
        "us_per_lookup": {name: round(seconds[name] / len(cases[name][2]) * 1e6, 1) for name in cases},
        "server_us_per_lookup_median": {name: round(statistics.median(server[name]), 1) for name in cases},
        "explain": {
            "partitioned_v7_through_parent": _explain(partitioned, PARENT_GET_SQL, (v7[0], job_day(v7[0]))),
            "partitioned_v7_by_partition": _explain(
                partitioned,
                _GET_DAY_SQL.replace("{partition}", partition_name(job_day(v7[0]))),  # type: ignore[arg-type]
                (v7[0],),
            ),
            "partitioned_non_v7": _explain(partitioned, _GET_ANY_DAY_SQL, (v4[0],)),
            "plain": _explain(plain, PLAIN_GET_SQL, (v7[0],)),
        },
    }
    return result


_encode = msgspec.json.Encoder().encode


def _batch(texts: list[str]) -> bytes:
    now = time.time()
    records = [
        RowRecord(new_job_id(), "succeeded", "en", "fr", text, text, None, 1, "bench", 10, 10, now, now, now,
                  {"n": 1}, None, None, None)
        for text in texts
    ]  # fmt: skip
    return _encode(records)


def bench_writes(partitioned: str, plain: str, batches: int) -> dict[str, Any]:
    """The writer's upsert, batch by batch alternating (ABBA) between the two tables; rows/s of the medians."""
    rng = random.Random(7)
    texts = [f"Segment {n} of a writer batch, about as long as a sentence of a document." for n in range(BATCH)]
    seconds: dict[str, list[float]] = {"partitioned": [], "plain": []}
    with (
        psycopg.connect(partitioned, autocommit=True) as p_conn,
        psycopg.connect(plain, autocommit=True) as q_conn,
    ):
        targets = {"partitioned": (p_conn, UPSERT_SQL), "plain": (q_conn, PLAIN_UPSERT_SQL)}
        for i in range(2 * batches + 20):
            name = "plain" if (i // 2 + i) % 2 else "partitioned"
            conn, statement = targets[name]
            rng.shuffle(texts)
            payload = _batch(texts).decode()
            begin = time.perf_counter()
            with conn.transaction():
                conn.execute(statement, (payload,), binary=True).fetchall()
            if i >= 20:  # the first ten of each warm up
                seconds[name].append(time.perf_counter() - begin)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    totals = {name: len(values) * BATCH / sum(values) for name, values in seconds.items()}
    return {
        "batch": BATCH,
        "batches_each": len(seconds["plain"]),
        "ms_per_batch_median": {name: round(value * 1000, 2) for name, value in medians.items()},
        "rows_per_s_median_batch": {name: round(BATCH / value) for name, value in medians.items()},
        "rows_per_s_overall": {name: round(value) for name, value in totals.items()},
        "partitioned_vs_plain": round(medians["plain"] / medians["partitioned"], 3),
    }


def main() -> None:
    """Fill both tables, measure lookups and writes, print them, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30, help="daily partitions (days of rows) to fill")
    parser.add_argument("--rows-per-day", type=int, default=20_000, help="rows in each day")
    parser.add_argument("--v4-every", type=int, default=20, help="one row in this many has a uuid4 (non-v7) id")
    parser.add_argument("--lookups", type=int, default=10_000, help="lookups by id of each kind")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds the lookups are split into")
    parser.add_argument("--batches", type=int, default=200, help="writer batches of 256 rows into each table")
    parser.add_argument("--out", type=Path, default=Path("bench/results/partitions.json"), help="JSON results")
    args = parser.parse_args()
    today = dt.datetime.now(dt.UTC).date()
    days = [today - dt.timedelta(days=n) for n in range(args.days - 1, -1, -1)]
    with benchmark_servers() as urls:
        partitioned = libpq_url(urls.database_url)
        name = f"bench_plain_{int(time.time())}"
        create_database(urls.database_url, name)
        plain = _database(urls.database_url, name)
        upgrade_database(plain, "0021")

        async def make_days() -> None:
            conn = await psycopg.AsyncConnection.connect(partitioned, autocommit=True)
            try:
                await create_partitions(conn, days)
            finally:
                await conn.close()

        asyncio.run(make_days())
        begin = time.perf_counter()
        _fill(partitioned, True, days, args.rows_per_day, args.v4_every)
        fill_partitioned = time.perf_counter() - begin
        begin = time.perf_counter()
        _fill(plain, False, days, args.rows_per_day, args.v4_every)
        fill_plain = time.perf_counter() - begin
        result: dict[str, Any] = {
            "rows": args.days * args.rows_per_day,
            "days": args.days,
            "fill_seconds": {"partitioned": round(fill_partitioned, 1), "plain": round(fill_plain, 1)},
            "lookups": bench_lookups(partitioned, plain, args.lookups, args.rounds),
            "writes": bench_writes(partitioned, plain, args.batches),
        }
        with psycopg.connect(partitioned, autocommit=True) as conn:
            result["postgres"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
    result["machine"] = {"python": platform.python_version(), "cpus": __import__("os").cpu_count()}
    result["command"] = (
        f"python -m bench.partitions --days {args.days} --rows-per-day {args.rows_per_day} "
        f"--v4-every {args.v4_every} --lookups {args.lookups} --batches {args.batches}"
    )
    lookups, writes = result["lookups"], result["writes"]
    print(f"{result['rows']:,} rows over {args.days} days; lookups, microseconds each: {lookups['us_per_lookup']}")
    print(f"  inside the server: {lookups['server_us_per_lookup_median']}")
    print(f"writes, batches of {BATCH}: ms per batch {writes['ms_per_batch_median']}")
    print(f"  rows/s {writes['rows_per_s_median_batch']}, partitioned/plain {writes['partitioned_vs_plain']}")
    print("EXPLAIN, v7 id through the parent:\n" + lookups["explain"]["partitioned_v7_through_parent"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
