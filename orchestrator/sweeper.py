"""The sweeper: finds runs and documents that should have finished and did not, and finishes them.

A run or document normally finishes through its completion entry: the worker appends it when
the group's last job is committed, the dispatcher queues the finish task. That chain can break:
the group's Redis hash expired before its last job finished (no entry is written), a finish
task ran out of retries in an older version, a submission was cancelled half-way (the missing
jobs never finish). The database knows the truth, so every ``DRAGOMAN_SWEEP_INTERVAL_SECONDS``
the sweeper asks it which groups have a final row for every job (wherever their jobs ran: every
shard's part of a group is in the one table, so a part whose record expired or whose completion entry
was lost is found like a whole group) and queues their finish task
(idempotent: a group finished meanwhile is left as it is). It also queues the split task again
for a document still ``splitting`` long after it was stored (its task was lost with a killed
orchestrator; splitting a document twice submits nothing twice).

Once an hour the sweeper also keeps the ``jobs`` table's daily partitions: it creates the coming
days' and, with ``DRAGOMAN_RETENTION_DAYS`` set, drops the days past it (``storage.partitions``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from contract.errors import DragomanError
from contract.orchestration import FINISH, SPLIT, SPLIT_TIMEOUT_SECONDS
from contract.sync_bridge import run_sync
from orchestrator.context import TaskContext
from storage.partitions import run_maintenance

log = logging.getLogger(__name__)

STALE_SPLIT_SECONDS = 2 * SPLIT_TIMEOUT_SECONDS
"""How long a document may stay ``splitting`` before its split task is queued again."""

PARTITION_INTERVAL_SECONDS = 3600.0
"""How often a sweeper creates the coming days' ``jobs`` partitions and drops the expired ones."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep queued."""

    finishes: int
    splits: int
    partitions_dropped: int = 0  # days of ``jobs`` past DRAGOMAN_RETENTION_DAYS dropped by this sweep


class GroupSweeper:
    """One sweep at a time: :meth:`sweep_once` is what its background loop repeats."""

    def __init__(
        self,
        ctx: TaskContext,
        stale_split_seconds: float = STALE_SPLIT_SECONDS,
        partition_interval_seconds: float = PARTITION_INTERVAL_SECONDS,
    ) -> None:
        self._ctx = ctx
        self._stale_split_seconds = stale_split_seconds
        self._partition_interval_seconds = partition_interval_seconds
        self._partitions_due = 0.0  # time.monotonic() of the next partition upkeep: the first sweep does it

    def sweep_once(self) -> SweepReport:
        """Queue the finish of every finishable group and the split of every stale document."""
        finishable, stale = run_sync(self._find())
        for kind, group_id, tenant in finishable:
            log.warning("sweeper: %s %s has a row for every job but is not finished; finishing it", kind, group_id)
            self._ctx.enqueue(FINISH, kind, group_id, tenant=tenant)
        for document_id, tenant, held in stale:
            if held:  # it tries again every DRAGOMAN_DOCUMENT_HOLD_SECONDS; this only stands in for a lost try
                log.info("sweeper: document %s is still held for room under its key's limit", document_id)
            else:
                log.warning("sweeper: document %s is still splitting; queueing its split again", document_id)
            self._ctx.enqueue(SPLIT, document_id, tenant=tenant)
        return SweepReport(finishes=len(finishable), splits=len(stale), partitions_dropped=self._keep_partitions())

    def _keep_partitions(self) -> int:
        """Create the coming days' partitions and drop the expired ones, once an interval; the number dropped.

        A failure is logged and tried again at the next interval: the sweep itself goes on (the
        writer creates a missing day's partition itself, and expired rows can wait an hour).
        """
        now = time.monotonic()
        if now < self._partitions_due:
            return 0
        self._partitions_due = now + self._partition_interval_seconds
        try:
            report = run_sync(run_maintenance(self._ctx.database_url, self._ctx.settings.retention_days))
        except DragomanError as exc:
            log.warning("sweeper: could not keep the jobs partitions (tried again in an hour): %s", exc)
            return 0
        if report.created:
            log.info("sweeper: created the jobs partitions %s", ", ".join(report.created))
        if report.dropped:
            log.warning(
                "sweeper: dropped the jobs partitions %s (older than DRAGOMAN_RETENTION_DAYS=%s)",
                ", ".join(report.dropped),
                self._ctx.settings.retention_days,
            )
        return len(report.dropped)

    async def _find(self) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, str | None, bool]]]:
        """The finishable groups and the stale documents, as the database knows them."""
        async with self._ctx.group_store() as store:
            return await store.finishable_groups(), await store.stale_splits(self._stale_split_seconds)
