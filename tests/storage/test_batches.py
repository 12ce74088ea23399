"""The batch store's reads for a batch's output: the finished prefix of its lines, a range of its jobs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contract.ids import job_id_for
from contract.services import ServiceUrls
from storage import AsyncBatchStore, AsyncConnectionPool


@pytest.fixture
async def batches(service_urls: ServiceUrls) -> AsyncIterator[AsyncBatchStore]:
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    yield AsyncBatchStore(pool)
    await pool.close()


def _rows(pg: Any, run_id: str, sequences: list[int], status: str = "succeeded") -> None:
    for n in sequences:
        pg.execute(
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, run_id, sequence, "
            "created_day) VALUES (%s, %s, 'en', 'fr', 'x', now(), %s, %s, jobs_created_day(%s, now()))",
            (job_id_for(run_id, n), status, run_id, n, job_id_for(run_id, n)),
        )


async def test_the_finished_prefix_ends_at_the_first_line_without_a_row(batches: AsyncBatchStore, pg: Any) -> None:
    run_id = str(uuid.uuid4())
    assert await batches.finished_prefix(run_id, 0, 100) == 0
    _rows(pg, run_id, [0, 1, 2, 4, 5])
    assert await batches.finished_prefix(run_id, 0, 100) == 3
    assert await batches.finished_prefix(run_id, 0, 2) == 2  # at most limit lines at a time
    assert await batches.finished_prefix(run_id, 3, 100) == 3
    assert await batches.finished_prefix(run_id, 4, 100) == 6
    _rows(pg, run_id, [3], status="failed")
    assert await batches.finished_prefix(run_id, 0, 100) == 6


async def test_jobs_of_a_range_of_lines_in_input_order(batches: AsyncBatchStore, pg: Any) -> None:
    run_id = str(uuid.uuid4())
    _rows(pg, run_id, [3, 0, 2, 5])
    _rows(pg, run_id, [1, 4], status="failed")
    succeeded = [job.id async for job, _ in batches.iter_jobs(run_id, succeeded=True, start=2, stop=5)]
    assert succeeded == [job_id_for(run_id, 2), job_id_for(run_id, 3)]
    others = [job.id async for job, _ in batches.iter_jobs(run_id, succeeded=False, start=1)]
    assert others == [job_id_for(run_id, 1), job_id_for(run_id, 4)]


async def test_output_rows_carry_what_an_output_line_needs(batches: AsyncBatchStore, pg: Any) -> None:
    run_id = str(uuid.uuid4())
    _rows(pg, run_id, [0, 1, 2])
    _rows(pg, run_id, [3], status="failed")
    pg.execute(
        "UPDATE jobs SET translated_text = 'Salut', model = 'm', prompt_tokens = 4, output_tokens = 5, "
        "finish_reason = 'length', finished_at = to_timestamp(1795392000.75), "
        """metadata = '{"custom_id": "r-1", "team": "docs"}' WHERE id = %s""",
        (job_id_for(run_id, 1),),
    )
    pg.execute("""UPDATE jobs SET metadata = '{"custom_id": "r-2"}' WHERE id = %s""", (job_id_for(run_id, 2),))
    rows = [row async for row in batches.iter_output_rows(run_id, start=1)]
    assert [row.job_id for row in rows] == [job_id_for(run_id, 1), job_id_for(run_id, 2)]  # succeeded, in order
    first, second = rows
    assert first.custom_id == "r-1" and first.metadata_json == '{"team": "docs"}'
    assert (first.translation, first.model, first.prompt_tokens, first.output_tokens) == ("Salut", "m", 4, 5)
    assert first.finished_at == 1_795_392_000 and first.finish_reason == "length"  # whole seconds, rounded down
    assert second.custom_id == "r-2" and second.metadata_json is None  # nothing but the custom_id
    assert [row.job_id async for row in batches.iter_output_rows(run_id, stop=1)] == [job_id_for(run_id, 0)]
