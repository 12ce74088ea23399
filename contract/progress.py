"""Where a run or document stands: counts per status, rate and the estimated time left.

The view every front door returns for a run or document (the client, the CLI, webhooks), built
by storage from a ``runs``/``documents`` row and the counts of its job rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RunCounts:
    """Jobs of a run (or document) by status; ``pending`` are queued or running (no final row yet).

    ``flagged`` and ``flags`` summarise the quality checks of the finished jobs (``contract.quality``).
    """

    total: int
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    flagged: int = 0
    """Finished jobs whose quality checks found something (a non-empty ``quality_flags``)."""
    flags: dict[str, int] = dataclasses.field(default_factory=dict)
    """Flagged jobs per flag (``contract.quality.QualityFlag`` values); a job with two flags counts in both.
    Only the flags that occur are present."""

    @property
    def finished(self) -> int:
        """Jobs with a final row."""
        return self.succeeded + self.failed + self.cancelled

    @property
    def pending(self) -> int:
        """Jobs still queued or running."""
        return max(0, self.total - self.finished)

    @property
    def percent(self) -> float:
        """Share of jobs finished, 0-100."""
        return 100.0 if self.total == 0 else 100.0 * self.finished / self.total


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """Where a run or document stands: status, counts, rate and the estimated time left."""

    id: str
    kind: str
    status: str
    counts: RunCounts
    jobs_per_second: float | None
    seconds_left: float | None
    created_at: float
    completed_at: float | None
    name: str | None
    error: str | None = None
    detected_source_lang: str | None = None
    """A document sent with ``source_lang="auto"``: the language found in its text once split (``None``
    before, and for every other run or document)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (``--json``, webhooks)."""
        data = dataclasses.asdict(self)
        data["counts"] = {
            **dataclasses.asdict(self.counts),
            "pending": self.counts.pending,
            "percent": round(self.counts.percent, 2),
        }
        return data


def progress(
    kind: str,
    row: tuple[Any, ...],
    counts: RunCounts,
    first_created: float | None,
    last_finished: float | None,
    detected_source_lang: str | None = None,
) -> GroupProgress:
    """A :class:`GroupProgress` from a runs/documents row and its job counts.

    ``row``: id, status, name, created_at, completed_at, error (epoch seconds for times).
    """
    group_id, status, name, created_at, completed_at, error = row
    rate = None
    if counts.finished and first_created is not None and last_finished is not None and last_finished > first_created:
        rate = counts.finished / (last_finished - first_created)
    left = None
    if counts.pending == 0:
        left = 0.0
    elif rate:
        left = counts.pending / rate
    if status == "running" and counts.total and counts.pending == 0:
        status = "finishing"  # every job is final; the orchestrator is finishing the run
    elif status == "splitting" and counts.total:
        status = "held"  # split, its segments waiting for room under its API key's limit of unfinished jobs
    return GroupProgress(
        id=str(group_id),
        kind=kind,
        status=status,
        counts=counts,
        jobs_per_second=rate,
        seconds_left=left,
        created_at=float(created_at),
        completed_at=float(completed_at) if completed_at is not None else None,
        name=name,
        error=error,
        detected_source_lang=detected_source_lang,
    )
