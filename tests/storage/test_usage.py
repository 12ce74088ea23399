"""Usage per tenant: the writer's upsert keeps ``usage_daily`` exact, and the store reads it by day and model."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from contract.services import ServiceUrls
from storage import AsyncConnectionPool, JobRowWriter, RowRecord, UnstorableRowError, libpq_url, upgrade_database
from storage.usage import UsageRow, UsageStore

DAY1 = dt.date(2031, 3, 1)
DAY2 = dt.date(2031, 3, 2)


def _at(day: dt.date, hour: int = 12) -> float:
    return dt.datetime(day.year, day.month, day.day, hour, tzinfo=dt.UTC).timestamp()


def _record(tenant: str | None, status: str = "succeeded", **fields: Any) -> RowRecord:
    finished = fields.pop("finished_at", _at(DAY1))
    values: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "status": status,
        "source_lang": "en",
        "target_lang": "fr",
        "source_text": "héllo wörld",  # 11 characters, 13 bytes
        "translated_text": "bonjour" if status == "succeeded" else None,
        "error": None if status == "succeeded" else "boom",
        "attempts": 1,
        "model": "m1",
        "prompt_tokens": 10,
        "output_tokens": 5,
        "created_at": finished - 5,
        "started_at": finished - 2,
        "finished_at": finished,
        "metadata": {},
        "run_id": None,
        "document_id": None,
        "sequence": None,
        "tenant": tenant,
    }
    values.update(fields)
    return RowRecord(**values)


@pytest.fixture
async def rows(service_urls: ServiceUrls) -> AsyncIterator[JobRowWriter]:
    """The worker's row writer on the test database."""
    writer = JobRowWriter(service_urls.database_url)
    yield writer
    await writer.close()


@pytest.fixture
async def store(service_urls: ServiceUrls) -> AsyncIterator[UsageStore]:
    """The usage store on a pool of its own."""
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    yield UsageStore(pool)
    await pool.close()


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _shape(rows: list[UsageRow]) -> list[tuple[Any, ...]]:
    return [
        (r.day, r.model, r.succeeded, r.failed, r.cancelled, r.characters, r.succeeded_characters, r.prompt_tokens,
         r.output_tokens)
        for r in rows
    ]  # fmt: skip


async def test_usage_by_day_and_model_per_tenant(rows: JobRowWriter, store: UsageStore) -> None:
    a, b = _tenant(), _tenant()
    await rows.write_rows(
        [
            _record(a),
            _record(a, model="m2", source_text="abc", prompt_tokens=1, output_tokens=2),
            _record(a, "failed", prompt_tokens=None, output_tokens=None),
            _record(a, "cancelled", finished_at=_at(DAY2, 23)),
            _record(b, source_text="x" * 100),
            _record(None),
        ]
    )
    await rows.write_rows([_record(a, finished_at=_at(DAY2, 0))])  # a second batch adds to the same key
    by_day = await store.usage(DAY1, DAY2, tenant=a, group_by=("day",))
    assert _shape(by_day) == [
        (DAY1, None, 2, 1, 0, 11 + 3 + 11, 11 + 3, 11, 7),
        (DAY2, None, 1, 0, 1, 22, 11, 20, 10),
    ]
    assert {r.tenant for r in by_day} == {a}
    by_model = await store.usage(DAY1, DAY2, tenant=a, group_by=("model",))
    assert _shape(by_model) == [(None, "m1", 2, 1, 1, 44, 22, 30, 15), (None, "m2", 1, 0, 0, 3, 3, 1, 2)]
    both = await store.usage(DAY1, DAY2, tenant=a, group_by=("day", "model"))
    assert [(r.day, r.model, r.jobs) for r in both] == [(DAY1, "m1", 2), (DAY1, "m2", 1), (DAY2, "m1", 2)]
    whole = await store.usage(DAY1, DAY2, tenant=a, group_by=())
    assert [(r.jobs, r.characters) for r in whole] == [(5, 47)]
    assert _shape(await store.usage(DAY2, DAY2, tenant=b)) == []  # b finished nothing that day
    assert [r.characters for r in await store.usage(DAY1, DAY1, tenant=b)] == [100]
    everyone = await store.usage(DAY1, DAY1, all_tenants=True, group_by=())
    assert {a, b, None} <= {r.tenant for r in everyone}


async def test_a_retried_failure_moves_to_its_final_status_and_a_duplicate_counts_once(
    rows: JobRowWriter, store: UsageStore
) -> None:
    tenant = _tenant()
    failed = _record(tenant, "failed", prompt_tokens=3, output_tokens=0)
    await rows.write_rows([failed])
    # succeeded the next day; a job's created_at is its submission's, the same on every delivery
    retried = _record(tenant, id=failed.id, finished_at=_at(DAY2), created_at=failed.created_at)
    await rows.write_rows([retried])
    await rows.write_rows([retried])  # a duplicate delivery: the upsert leaves the success alone
    late = _record(tenant, "failed", id=failed.id, created_at=failed.created_at)
    await rows.write_rows([late])  # and a late failure too
    usage = await store.usage(DAY1, DAY2, tenant=tenant)
    assert _shape(usage) == [(DAY2, None, 1, 0, 0, 11, 11, 10, 5)]  # day 1's failure was taken out


async def test_a_refused_batch_counts_nothing(rows: JobRowWriter, store: UsageStore) -> None:
    tenant = _tenant()
    with pytest.raises(UnstorableRowError):
        await rows.write_rows([_record(tenant), _record(tenant, source_text="nul \x00 here")])
    assert await store.usage(DAY1, DAY2, tenant=tenant) == []


def test_the_migration_sums_the_jobs_already_stored(fresh_database: str) -> None:
    upgrade_database(fresh_database, "0013")
    with psycopg.connect(libpq_url(fresh_database), autocommit=True) as conn:
        insert = (
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, model, prompt_tokens, "
            "output_tokens, created_at, finished_at, tenant, run_id, error) "
            "VALUES (gen_random_uuid(), %s, 'en', 'fr', %s, 'm', %s, %s, %s, %s, %s, %s, %s)"
        )
        when = dt.datetime(2031, 3, 1, 12, tzinfo=dt.UTC)
        conn.execute(insert, ("succeeded", "héllo", 4, 6, when, when, "acme", None, None))
        conn.execute(insert, ("failed", "abc", None, None, when, when, "acme", None, "boom"))
        conn.execute(insert, ("succeeded", "zz", 1, 1, when, when, None, None, None))
        # A run's line cancelled before it was submitted never reached a worker: not counted.
        conn.execute(
            insert, ("cancelled", "", None, None, when, when, None, uuid.uuid4(), "cancelled before it was submitted")
        )
        upgrade_database(fresh_database)
        got = conn.execute(
            "SELECT tenant, day, model, status, jobs, characters, prompt_tokens, output_tokens FROM usage_daily "
            "ORDER BY 1, 4"
        ).fetchall()
    assert got == [
        ("", DAY1, "m", "succeeded", 1, 2, 1, 1),
        ("acme", DAY1, "m", "failed", 1, 3, 0, 0),
        ("acme", DAY1, "m", "succeeded", 1, 5, 4, 6),
    ]


async def test_writers_committing_the_same_tenants_at_once_count_exactly_and_never_deadlock(
    service_urls: ServiceUrls, store: UsageStore
) -> None:
    """Four workers' writers, each batch touching the same usage keys in its own order of rows."""
    tenants = [_tenant() for _ in range(3)]
    writers = [JobRowWriter(service_urls.database_url) for _ in range(4)]

    async def write(writer: JobRowWriter, offset: int) -> None:
        for n in range(15):
            batch = [
                _record(tenants[(i + offset) % 3], "failed" if (i + n) % 7 == 0 else "succeeded",
                        model=("m1", "m2")[(i + offset) % 2])
                for i in range(40)
            ]  # fmt: skip
            await writer.write_rows(batch[::-1] if (n + offset) % 2 else batch)

    try:
        await asyncio.wait_for(asyncio.gather(*(write(w, k) for k, w in enumerate(writers))), 120)
    finally:
        for writer in writers:
            await writer.close()
    usage = [row for tenant in tenants for row in await store.usage(DAY1, DAY1, tenant=tenant, group_by=())]
    assert sum(r.jobs for r in usage) == 4 * 15 * 40
    assert sum(r.characters for r in usage) == 4 * 15 * 40 * 11
    assert sum(r.failed for r in usage) == 4 * sum(1 for n in range(15) for i in range(40) if (i + n) % 7 == 0)
