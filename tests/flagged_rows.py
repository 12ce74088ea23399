"""Finished job rows with quality flags, written by the worker's own upsert: what the flag tests start from."""

from __future__ import annotations

import time
from typing import Any

from contract.ids import job_id_for
from storage import JobRowWriter, RowRecord


def flagged_row(
    group_id: str,
    sequence: int,
    flags: dict[str, str] | None,
    *,
    status: str = "succeeded",
    run_id: str | None = None,
    document_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    tenant: str | None = None,
) -> RowRecord:
    """Line ``sequence`` of the run or document ``group_id``, finished with ``flags`` (None: unchecked)."""
    now = time.time()
    succeeded = status == "succeeded"
    return RowRecord(
        id=job_id_for(group_id, sequence),
        status=status,
        source_lang="en",
        target_lang="fr",
        source_text=f"Line {sequence}.",
        translated_text=f"Ligne {sequence}." if succeeded else None,
        error=None if succeeded else "boom",
        attempts=1,
        model="m",
        prompt_tokens=3,
        output_tokens=3,
        created_at=now - 2,
        started_at=now - 1,
        finished_at=now,
        metadata=metadata or {},
        run_id=run_id,
        document_id=document_id,
        sequence=sequence,
        tenant=tenant,
        quality_flags=flags,
    )


async def write_rows(database_url: str | None, records: list[RowRecord]) -> None:
    """Store ``records`` as the worker's result writer does."""
    assert database_url is not None
    writer = JobRowWriter(database_url)
    try:
        await writer.write_rows(records)
    finally:
        await writer.close()
