"""The history pages (``storage.history``): keyset order with ties, tenant scope, the 0019 indexes, the cursor."""

from __future__ import annotations

import re
import uuid

import pytest

from contract.services import ServiceUrls
from storage import AsyncConnectionPool, GroupStore
from storage.history import (
    GROUP_PAGE_SQL,
    STANDALONE_PAGE_SQL,
    HistoryStore,
    InvalidCursorError,
    PageCursor,
    decode_cursor,
    encode_cursor,
    micros,
)
from storage.jobs import JobRowWriter, RowRecord

T0 = 1_900_000_000.0


def _row(job_id: str, tenant: str, created_at: float, run_id: str | None = None, **extra: object) -> RowRecord:
    return RowRecord(
        id=job_id,
        status="succeeded",
        source_lang="en",
        target_lang="fr",
        source_text=f"text {job_id}",
        translated_text="texte",
        error=None,
        attempts=1,
        model="m",
        prompt_tokens=1,
        output_tokens=1,
        created_at=created_at,
        started_at=created_at,
        finished_at=created_at + 1,
        metadata={},
        run_id=run_id,
        document_id=None,
        sequence=0 if run_id else None,
        tenant=tenant,
        **extra,  # type: ignore[arg-type]
    )


async def test_job_pages_follow_created_at_then_id_and_keep_to_the_tenant(
    pool: AsyncConnectionPool, service_urls: ServiceUrls, groups: GroupStore
) -> None:
    tenant, other = f"t-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    ids = [str(uuid.uuid4()) for _ in range(7)]
    times = [T0, T0, T0, T0 + 0.000001, T0 + 1.5, T0 + 1.5, T0 + 3]  # ties, and a microsecond apart
    run_id = str(uuid.uuid4())
    await groups.create_run(run_id, "en", "fr", 1, "r", None, tenant)
    writer = JobRowWriter(service_urls.database_url)
    try:
        await writer.write_rows(
            [_row(i, tenant, t) for i, t in zip(ids, times, strict=True)]
            + [_row(str(uuid.uuid4()), other, T0 + 2), _row(str(uuid.uuid4()), tenant, T0 + 2, run_id=run_id)]
        )
    finally:
        await writer.close()
    expected = [i for _, i in sorted(zip(times, ids, strict=True), reverse=True)]
    store = HistoryStore(pool)
    seen: list[str] = []
    before: PageCursor | None = None
    while True:
        page = await store.standalone_jobs(tenant, before, 3)
        seen += [job.id for job in page]
        if len(page) < 3:
            break
        last = page[-1]
        assert last.created_at is not None
        before = decode_cursor(encode_cursor(PageCursor(micros(last.created_at), last.id)))
    assert seen == expected  # the run's job and the other tenant's are not listed


async def test_the_pages_are_read_by_the_history_indexes(pool: AsyncConnectionPool) -> None:
    """With scans the planner could pick instead turned off, each page still has an index that answers it:
    the partial index's predicate matches the stand-alone query, and each group table has its own."""
    cursor_params = ("t", 1_900_000_000_000_000, str(uuid.uuid4()), 21)
    queries = {
        "jobs_standalone_tenant_created": STANDALONE_PAGE_SQL.format(
            before=" AND (created_at, id) < (timestamptz 'epoch' + %s * interval '1 microsecond', %s::uuid)"
        ),
        "runs_tenant_created": GROUP_PAGE_SQL.format(
            extra="",
            table="runs",
            before=" AND (g.created_at, g.id) < (timestamptz 'epoch' + %s * interval '1 microsecond', %s::uuid)",
        ),
        "documents_tenant_created": GROUP_PAGE_SQL.format(
            extra=", g.format",
            table="documents",
            before=" AND (g.created_at, g.id) < (timestamptz 'epoch' + %s * interval '1 microsecond', %s::uuid)",
        ),
    }
    async with pool.connection() as conn:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            await conn.execute(f"SET {setting} = off")
        try:
            for index, query in queries.items():
                cursor = await conn.execute("EXPLAIN " + query, cursor_params)
                plan = "\n".join(str(row[0]) for row in await cursor.fetchall())
                if index.startswith("jobs_"):  # each day's partition has its own copy of the index (0022)
                    assert re.search(r"Index Scan Backward using jobs_d\d{8}_tenant_created_at_id_idx", plan), plan
                    assert "Seq Scan" not in plan, plan
                else:
                    assert f"Index Scan Backward using {index}" in plan, plan
                assert "Sort  (" not in plan, plan  # no sort node (a Merge Append of the partitions' scans is none)
        finally:
            await conn.execute("RESET ALL")


async def test_group_pages_carry_each_groups_progress(pool: AsyncConnectionPool, groups: GroupStore) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    await groups.create_run(first, "en", "fr", 4, "first", None, tenant)
    await groups.create_document(second, "md", "# Hi", "en", "de", "a.md", None, 500, tenant=tenant)
    await groups.create_run(str(uuid.uuid4()), "en", "fr", 1, "theirs", None, "someone-else")
    store = HistoryStore(pool)
    runs = await store.groups("run", tenant, None, 10)
    assert [(e.progress.id, e.progress.name, e.progress.counts.total, e.format) for e in runs] == [
        (first, "first", 4, None)
    ]
    documents = await store.groups("document", tenant, None, 10)
    assert [(e.progress.id, e.progress.name, e.format) for e in documents] == [(second, "a.md", "md")]
    after = await store.groups("run", tenant, PageCursor(runs[0].created_us, first), 10)
    assert after == []


@pytest.mark.parametrize("text", ["", "x", "bm90IGEgY3Vyc29y", "MTIzOm5vdC1hLXV1aWQ", "!!!"])
def test_a_cursor_no_page_handed_out_is_refused(text: str) -> None:
    with pytest.raises(InvalidCursorError, match="not a cursor"):
        decode_cursor(text)


def test_a_cursor_round_trips() -> None:
    cursor = PageCursor(1_900_000_000_123_456, str(uuid.uuid4()))
    assert decode_cursor(encode_cursor(cursor)) == cursor
