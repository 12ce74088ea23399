"""The Redis state record of a queued or running job, as the public :class:`Job` view.

The scripts that write and move state records live in :mod:`broker.scripts`.
"""

from __future__ import annotations

from collections.abc import Mapping

from contract.schemas import Job, JobStatus, timestamp_to_datetime


def state_to_job(job_id: str, state: Mapping[str, str]) -> Job:
    """The public :class:`Job` view of a state record."""
    return Job(
        id=job_id,
        status=JobStatus(state.get("status", JobStatus.QUEUED)),
        source_lang=state.get("source_lang"),
        target_lang=state.get("target_lang"),
        error=state.get("error") or None,
        attempts=int(state.get("attempts") or 0),
        created_at=timestamp_to_datetime(state.get("created_at")),
        started_at=timestamp_to_datetime(state.get("started_at")),
        finished_at=timestamp_to_datetime(state.get("finished_at")),
        tenant=state.get("tenant") or None,
        model=state.get("model") or None,
    )
