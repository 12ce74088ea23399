"""The ``jobs`` table by day (migration 0022): the day of an id, one-partition lookups, the writer's missing
days, retention that drops whole partitions (storage, the sweeper, ``dragoman db retention``), the migration
of an existing table, and the v7 ids of a v7 group's jobs."""

from __future__ import annotations

import datetime as dt
import os
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from broker.keys import RedisKeys
from contract.ids import job_id_for, new_job_id
from contract.services import ServiceUrls
from contract.settings import Settings
from orchestrator.context import TaskContext
from orchestrator.sweeper import GroupSweeper
from storage import (
    AsyncConnectionPool,
    JobRowWriter,
    JobStore,
    RowRecord,
    downgrade_database,
    libpq_url,
    upgrade_database,
)
from storage.jobs import _GET_ANY_DAY_SQL, get_day_sql
from storage.partitions import AHEAD_DAYS, job_day, maintain_partitions, partition_name

TODAY = dt.datetime.now(dt.UTC).date()


def _v7_on(day: dt.date, hour: int = 12) -> str:
    """A UUID version 7 whose timestamp falls on ``day`` (a job made that day)."""
    millis = int(dt.datetime(day.year, day.month, day.day, hour, tzinfo=dt.UTC).timestamp() * 1000)
    raw = bytearray(millis.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def _record(job_id: str, created: dt.date = TODAY, **fields: Any) -> RowRecord:
    at = dt.datetime(created.year, created.month, created.day, 12, tzinfo=dt.UTC).timestamp()
    values: dict[str, Any] = {
        "id": job_id,
        "status": "succeeded",
        "source_lang": "en",
        "target_lang": "fr",
        "source_text": "hello",
        "translated_text": "bonjour",
        "error": None,
        "attempts": 1,
        "model": "m",
        "prompt_tokens": 1,
        "output_tokens": 1,
        "created_at": at,
        "started_at": at,
        "finished_at": at + 1,
        "metadata": {},
        "run_id": None,
        "document_id": None,
        "sequence": None,
        "tenant": None,
    }
    values.update(fields)
    return RowRecord(**values)


@pytest.fixture
async def fresh_pool(fresh_database: str) -> AsyncIterator[AsyncConnectionPool]:
    """A pool on a database of its own, migrated to head (retention drops its partitions, nobody else's)."""
    upgrade_database(fresh_database)
    connections = AsyncConnectionPool(fresh_database, max_connections=2)
    yield connections
    await connections.close()


def _day_partition_sql(day: dt.date) -> str:
    """Create ``day``'s partition the quick way (a test's setup; the store attaches instead)."""
    following = day + dt.timedelta(days=1)
    return f"CREATE TABLE {partition_name(day)} PARTITION OF jobs FOR VALUES FROM ('{day}') TO ('{following}')"


def _partitions(url: str) -> set[str]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'jobs'::regclass")
        return {row[0] for row in rows}


def test_the_day_of_an_id_is_the_sql_rule_s(pg: Any) -> None:
    """``job_day`` (Python, for lookups) and ``jobs_created_day`` (SQL, for inserts) agree on every kind of id."""
    fallback = dt.datetime(2030, 5, 17, 23, 59, tzinfo=dt.UTC)  # a non-v7 id's day comes from created_at
    group = new_job_id()
    ids = [new_job_id() for _ in range(20)] + [_v7_on(dt.date(2001, 1, 1), 0), _v7_on(dt.date(2099, 12, 31), 23)]
    ids += [job_id_for(group, n) for n in range(5)] + [str(uuid.uuid4()) for _ in range(5)]
    ids += [job_id_for(str(uuid.uuid4()), 3), "00000000-0000-7000-8000-000000000000"]
    ids += ["01890000-0000-7000-c000-000000000000"]  # version nibble 7 but not the RFC variant: not v7
    for job_id in ids:
        (sql_day,) = pg.execute("SELECT jobs_created_day(%s, %s)", (job_id, fallback)).fetchone()
        assert sql_day == (job_day(job_id) or fallback.date()), job_id
    assert job_day(ids[-1]) is None and job_day(ids[-2]) == dt.date(1970, 1, 1)
    assert job_day(ids[0]) == TODAY or job_day(ids[0]) == TODAY + dt.timedelta(days=1)  # a run near midnight
    assert job_day("FFFFFFFF-FFFF-7FFF-BFFF-FFFFFFFFFFFF") is None  # not canonical: looked up in every partition


def test_a_v7_group_s_jobs_are_v7_ids_of_the_group_s_day() -> None:
    group = _v7_on(dt.date(2027, 2, 3))
    ids = [job_id_for(group, n) for n in range(2000)]
    assert len(set(ids)) == 2000 and ids == [job_id_for(group, n) for n in range(2000)]  # resumable
    for job_id in ids[:50]:
        parsed = uuid.UUID(job_id)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert job_id[:13] == group[:13]  # the group's 48-bit timestamp
        assert job_day(job_id) == dt.date(2027, 2, 3)
    assert job_id_for(_v7_on(dt.date(2027, 2, 3)), 0) != ids[0]  # another group, other ids


def test_an_older_group_keeps_its_uuid5_ids() -> None:
    """A run created before v7 group ids, resumed after the upgrade, recomputes the same job ids."""
    group = str(uuid.uuid4())
    for n in (0, 1, 99_999):
        assert job_id_for(group, n) == str(uuid.uuid5(uuid.UUID(group), str(n)))
        assert job_day(job_id_for(group, n)) is None
    assert job_id_for(group.upper(), 7) == job_id_for(group, 7)


async def test_a_v7_lookup_probes_one_partition_and_any_other_id_every_one(
    pool: AsyncConnectionPool, service_urls: ServiceUrls
) -> None:
    writer = JobRowWriter(service_urls.database_url)
    v7, v4 = new_job_id(), str(uuid.uuid4())
    try:
        await writer.write_rows([_record(v7), _record(v4, source_text="old id")])
    finally:
        await writer.close()
    store = JobStore(pool)
    found, old = await store.get(v7), await store.get(v4)
    assert found is not None and found.id == v7 and old is not None and old.text == "old id"
    assert set(await store.get_many([v7, v4, new_job_id(), str(uuid.uuid4())])) == {v7, v4}
    assert await store.get(_v7_on(dt.date(1999, 1, 2))) is None  # a day with no partition: not found
    day = job_day(v7)
    async with pool.connection() as conn:
        await conn.execute("SET enable_seqscan = off")  # the test's days hold a few rows: a scan costs less
        cursor = await conn.execute(
            sql.SQL("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ") + get_day_sql(day),  # type: ignore[arg-type]
            (v7,),
        )
        plan = "\n".join(row[0] for row in await cursor.fetchall())
        cursor = await conn.execute("EXPLAIN (COSTS OFF) " + _GET_ANY_DAY_SQL, (v4,))
        every = "\n".join(row[0] for row in await cursor.fetchall())
        await conn.execute("RESET ALL")
    assert plan.count("Index Scan") == 1 and f"{partition_name(day)}_pkey" in plan, plan  # type: ignore[arg-type]
    assert "Append" not in plan and "Seq Scan" not in plan, plan
    assert every.count("_pkey on jobs_d") >= AHEAD_DAYS + 1, every  # one probe per day: the non-v7 cost


async def test_the_writer_creates_the_partition_of_a_day_that_has_none(
    fresh_pool: AsyncConnectionPool, fresh_database: str
) -> None:
    long_ago = dt.date(2019, 6, 1)
    v7, v4 = _v7_on(long_ago), str(uuid.uuid4())
    assert partition_name(long_ago) not in _partitions(fresh_database)
    writer = JobRowWriter(fresh_database)
    try:
        written, _ = await writer.write_rows([_record(v7, long_ago), _record(v4, dt.date(2018, 3, 4))])
        assert written == {v7, v4}
        _, final = await writer.write_rows([_record(v7, long_ago)])  # a duplicate: the final row read back
        assert [row.id for row in final] == [v7]
    finally:
        await writer.close()
    assert {partition_name(long_ago), "jobs_d20180304"} <= _partitions(fresh_database)
    store = JobStore(fresh_pool)
    assert (await store.get(v7)) is not None and (await store.get(v4)) is not None


async def test_retention_drops_whole_days_and_their_jobs_are_not_found(
    fresh_pool: AsyncConnectionPool, fresh_database: str
) -> None:
    days = {age: TODAY - dt.timedelta(days=age) for age in (40, 31, 30, 5)}
    ids = {age: _v7_on(day) for age, day in days.items()}
    old_v4 = str(uuid.uuid4())  # a pre-v7 id, placed by its created_at
    writer = JobRowWriter(fresh_database)
    try:
        await writer.write_rows([_record(job_id, days[age]) for age, job_id in ids.items()])
        await writer.write_rows([_record(old_v4, days[40], tenant="acme")])
    finally:
        await writer.close()
    expired = {partition_name(days[40]), partition_name(days[31])}
    async with fresh_pool.connection() as conn:
        usage_before = await (await conn.execute("SELECT sum(jobs) FROM usage_daily")).fetchone()
        dry = await maintain_partitions(conn, 30, dry_run=True)
        assert set(dry.dropped) == expired and expired <= _partitions(fresh_database)
        assert await maintain_partitions(conn, None) is not None  # no retention: nothing dropped
        assert expired <= _partitions(fresh_database)
        report = await maintain_partitions(conn, 30)
        assert set(report.dropped) == expired and report.created == []  # the migration made the days ahead
        left = _partitions(fresh_database)
        assert not expired & left and {partition_name(days[30]), partition_name(days[5])} <= left
        tables = await conn.execute("SELECT count(*) FROM pg_class WHERE relname = ANY(%s)", (list(expired),))
        assert (await tables.fetchone()) == (0,)  # dropped, not left detached
        usage_after = await (await conn.execute("SELECT sum(jobs) FROM usage_daily")).fetchone()
        assert usage_after == usage_before == (5,)  # the usage rollups stay
        again = await maintain_partitions(conn, 30)
        assert again.dropped == [] and again.created == []
        later = await maintain_partitions(conn, None, today=TODAY + dt.timedelta(days=AHEAD_DAYS + 2))
        # a sweeper that slept past the days made ahead: from its today on
        assert later.created == [partition_name(TODAY + dt.timedelta(days=AHEAD_DAYS + 2 + n)) for n in range(4)]
    store = JobStore(fresh_pool)
    assert await store.get(ids[40]) is None and await store.get(ids[31]) is None and await store.get(old_v4) is None
    assert await store.get(ids[30]) is not None and await store.get(ids[5]) is not None
    assert set(await store.get_many(list(ids.values()))) == {ids[30], ids[5]}


def test_the_sweeper_creates_and_drops_partitions_once_an_interval(
    fresh_database: str, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    upgrade_database(fresh_database)
    long_ago = TODAY - dt.timedelta(days=100)
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        name = partition_name(long_ago)
        conn.execute(_day_partition_sql(long_ago))
        conn.execute(f"DROP TABLE {partition_name(TODAY + dt.timedelta(days=AHEAD_DAYS))}")  # a day ahead missing
    settings = Settings(
        redis_url=service_urls.redis_url, database_url=fresh_database, data_dir=tmp_path, retention_days=90
    )
    sweeper = GroupSweeper(
        TaskContext(settings, service_urls.redis_url, fresh_database, RedisKeys.from_settings(settings))
    )
    assert sweeper.sweep_once().partitions_dropped == 1
    left = _partitions(fresh_database)
    assert name not in left and partition_name(TODAY + dt.timedelta(days=AHEAD_DAYS)) in left
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        conn.execute(_day_partition_sql(long_ago))
    assert sweeper.sweep_once().partitions_dropped == 0  # within the hour: not again
    assert name in _partitions(fresh_database)


def test_dragoman_db_retention_prints_what_it_drops(
    fresh_database: str, service_urls: ServiceUrls, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    upgrade_database(fresh_database)
    day = TODAY - dt.timedelta(days=10)
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        conn.execute(_day_partition_sql(day))
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", fresh_database)
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", service_urls.redis_url)
    monkeypatch.setenv("DRAGOMAN_RETENTION_DAYS", "7")
    assert main(["db", "retention", "--dry-run"]) == 0
    assert f"would drop    {partition_name(day)}" in capsys.readouterr().out
    assert partition_name(day) in _partitions(fresh_database)
    assert main(["db", "retention"]) == 0
    assert f"drop    {partition_name(day)}" in capsys.readouterr().out
    assert partition_name(day) not in _partitions(fresh_database)
    monkeypatch.delenv("DRAGOMAN_RETENTION_DAYS")
    assert main(["db", "retention"]) == 0
    assert "every day's jobs are kept" in capsys.readouterr().out


def test_the_migration_moves_an_existing_table_and_back(fresh_database: str) -> None:
    """0021 → 0022 with rows of old (uuid4) ids over several days: every row found by id, in its day's partition."""
    upgrade_database(fresh_database, "0021")
    rows: dict[str, dt.datetime] = {}
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        for age in (0, 0, 1, 2, 2, 400):
            job_id = str(uuid.uuid4())
            rows[job_id] = dt.datetime.now(dt.UTC) - dt.timedelta(days=age)
            conn.execute(
                "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, finished_at, run_id, "
                "sequence) VALUES (%s, 'succeeded', 'en', 'fr', 'x', %s, %s, %s, 0)",
                (job_id, rows[job_id], rows[job_id], str(uuid.uuid4()) if age == 2 else None),
            )
    upgrade_database(fresh_database)
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        placed = dict(conn.execute("SELECT id::text, tableoid::regclass::text FROM jobs").fetchall())
        (kind,) = conn.execute("SELECT relkind FROM pg_class WHERE relname = 'jobs'").fetchone()  # type: ignore[misc]
    assert kind == "p" and set(placed) == set(rows)
    for job_id, created in rows.items():
        assert placed[job_id] == partition_name(created.astimezone(dt.UTC).date())
    pool = AsyncConnectionPool(fresh_database, max_connections=1)

    async def every_row() -> set[str]:
        store = JobStore(pool)
        found = {job_id for job_id in rows if await store.get(job_id) is not None}
        return found & set(await store.get_many(list(rows)))

    from contract.sync_bridge import run_sync

    try:
        assert run_sync(every_row()) == set(rows)
    finally:
        run_sync(pool.close())
    downgrade_database(fresh_database, "0021")
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        (kind,) = conn.execute("SELECT relkind FROM pg_class WHERE relname = 'jobs'").fetchone()  # type: ignore[misc]
        ids = {row[0] for row in conn.execute("SELECT id::text FROM jobs")}
        key = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'jobs_pkey'").fetchone()
    assert kind == "r" and ids == set(rows) and key == ("PRIMARY KEY (id)",)
    upgrade_database(fresh_database)
    ahead = {partition_name(TODAY + dt.timedelta(days=n)) for n in range(-2, AHEAD_DAYS + 1)}
    assert _partitions(fresh_database) == ahead | {partition_name(TODAY - dt.timedelta(days=400))}


async def test_a_job_to_retry_is_read_from_its_day_s_partition(
    pool: AsyncConnectionPool, service_urls: ServiceUrls
) -> None:
    from storage.history import RETRY_JOB_SQL, HistoryStore
    from storage.partitions import day_bounds

    v7, v4 = new_job_id(), str(uuid.uuid4())
    writer = JobRowWriter(service_urls.database_url)
    try:
        await writer.write_rows([_record(v7, tenant="acme", status="failed"), _record(v4, tenant="acme")])
    finally:
        await writer.close()
    history = HistoryStore(pool)
    for job_id in (v7, v4):
        found = await history.job_to_retry("acme", job_id)
        assert found is not None and found[0].id == job_id
        assert await history.job_to_retry("other", job_id) is None
    async with pool.connection() as conn:
        cursor = await conn.execute("EXPLAIN (COSTS OFF) " + RETRY_JOB_SQL, (v7, "acme", *day_bounds(v7)))
        plan = "\n".join(row[0] for row in await cursor.fetchall())
    assert set(re.findall(r"jobs_d\d{8}", plan)) == {partition_name(job_day(v7))}, plan  # type: ignore[arg-type]
