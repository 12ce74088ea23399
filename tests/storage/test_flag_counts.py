"""Quality flags in a group's progress, its results and its batch tally, on real PostgreSQL rows
written by the worker's upsert (``RowRecord.quality_flags``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contract.flag_filter import ANY_FLAG, parse_flag_filter
from contract.ids import job_id_for
from contract.services import ServiceUrls
from storage import AsyncBatchStore, AsyncConnectionPool, GroupStore, JobRowWriter, RowRecord
from tests.flagged_rows import flagged_row

FLAGS: list[dict[str, str] | None] = [
    {},  # 0: checked, clean
    {"numbers": "source number 42 missing"},  # 1
    {"numbers": "source number 7 missing", "wrong_language": "output is en, not fr"},  # 2
    None,  # 3: never checked
    {"glossary": "term 'queue' not rendered as 'file'"},  # 4
]


@pytest.fixture
async def writer(service_urls: ServiceUrls) -> AsyncIterator[JobRowWriter]:
    """The worker's row writer on the test database."""
    rows = JobRowWriter(service_urls.database_url)
    yield rows
    await rows.close()


def _record(run_id: str, sequence: int, flags: dict[str, str] | None, status: str = "succeeded") -> RowRecord:
    return flagged_row(run_id, sequence, flags, status=status, run_id=run_id, metadata={"custom_id": f"c-{sequence}"})


async def _flagged_run(groups: GroupStore, writer: JobRowWriter) -> str:
    """A run of 7 jobs: the five of :data:`FLAGS` succeeded, one failed (unchecked), one still pending."""
    run_id = str(uuid.uuid4())
    await groups.create_run(run_id, "en", "fr", 7, "flags", None)
    await groups.run_submitted(run_id, 7, done=True)
    records = [_record(run_id, n, flags) for n, flags in enumerate(FLAGS)]
    records.append(_record(run_id, 5, None, status="failed"))
    await writer.write_rows(records)
    return run_id


async def test_progress_counts_flagged_jobs_and_each_flag(groups: GroupStore, writer: JobRowWriter) -> None:
    run_id = await _flagged_run(groups, writer)
    progress = await groups.progress("run", run_id)
    assert progress is not None
    counts = progress.counts
    assert (counts.succeeded, counts.failed, counts.pending) == (5, 1, 1)
    assert counts.flagged == 3  # {} and None are not flagged
    assert counts.flags == {"numbers": 2, "wrong_language": 1, "glossary": 1}  # only the flags that occur
    assert progress.to_dict()["counts"]["flags"] == {"numbers": 2, "wrong_language": 1, "glossary": 1}


async def test_a_group_without_flags_counts_none(groups: GroupStore) -> None:
    run_id = str(uuid.uuid4())
    await groups.create_run(run_id, "en", "fr", 2, None, None)
    progress = await groups.progress("run", run_id)
    assert progress is not None and progress.counts.flagged == 0 and progress.counts.flags == {}


async def test_document_progress_counts_its_segments_flags(groups: GroupStore, pg: Any) -> None:
    doc = str(uuid.uuid4())
    await groups.create_document(doc, "txt", "A. B.", "en", "fr", None, None, 100)
    for sequence, flags in enumerate(['{"tags": "tag <1> missing"}', "{}"]):
        pg.execute(
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, created_at, "
            "finished_at, document_id, sequence, quality_flags, created_day) "
            "VALUES (%s, 'succeeded', 'en', 'fr', 'x', 'y', now(), now(), %s, %s, %s, jobs_created_day(%s, now()))",
            (job_id_for(doc, sequence), doc, sequence, flags, job_id_for(doc, sequence)),
        )
    progress = await groups.progress("document", doc)
    assert progress is not None and progress.counts.flagged == 1 and progress.counts.flags == {"tags": 1}
    assembly = await groups.assembly_input(doc)
    assert [row.quality_flags for row in assembly.segments] == [{"tags": "tag <1> missing"}, {}]


async def test_results_carry_flags_and_the_filter_keeps_flagged_lines(groups: GroupStore, writer: JobRowWriter) -> None:
    run_id = await _flagged_run(groups, writer)
    every = [line async for line in groups.iter_results(run_id)]
    assert [line["custom_id"] for line in every] == ["c-0", "c-1", "c-2", "c-3", "c-4", "c-5"]
    assert every[0]["quality_flags"] == {} and every[1]["quality_flags"] == {"numbers": "source number 42 missing"}
    assert "quality_flags" not in every[3] and "quality_flags" not in every[5]  # never checked
    flagged = [line["custom_id"] async for line in groups.iter_results(run_id, flagged=ANY_FLAG)]
    assert flagged == ["c-1", "c-2", "c-4"]
    chosen = parse_flag_filter("wrong_language,glossary")
    assert [line["custom_id"] async for line in groups.iter_results(run_id, flagged=chosen)] == ["c-2", "c-4"]
    assert [line async for line in groups.iter_results(run_id, flagged=parse_flag_filter("tags"))] == []


async def test_the_flagged_filter_pages_through_a_run(
    groups: GroupStore, writer: JobRowWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = str(uuid.uuid4())
    await groups.create_run(run_id, "en", "fr", 25, None, None)
    flags = {"repetition": "'la la' repeated 9 times"}
    await writer.write_rows([_record(run_id, n, flags if n % 3 == 0 else {}) for n in range(25)])
    monkeypatch.setattr(GroupStore, "results_page", 2)  # pages of 2: every page boundary is crossed
    lines = [line["custom_id"] async for line in groups.iter_results(run_id, flagged=ANY_FLAG)]
    assert lines == [f"c-{n}" for n in range(0, 25, 3)]


async def test_a_batch_tally_counts_flags_in_the_same_query(
    service_urls: ServiceUrls, groups: GroupStore, writer: JobRowWriter
) -> None:
    run_id = await _flagged_run(groups, writer)
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=1)
    try:
        tally = await AsyncBatchStore(pool).tally(run_id)
        assert (tally.succeeded, tally.failed, tally.flagged) == (5, 1, 3)
        assert tally.flags == {"numbers": 2, "wrong_language": 1, "glossary": 1}
        rows = [row async for row in AsyncBatchStore(pool).iter_output_rows(run_id)]
        assert [row.quality_flags_json for row in rows[:2]] == ["{}", '{"numbers": "source number 42 missing"}']
        assert rows[3].quality_flags_json is None
    finally:
        await pool.close()
