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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from contract.orchestration import FINISH, SPLIT, SPLIT_TIMEOUT_SECONDS
from contract.sync_bridge import run_sync
from orchestrator.context import TaskContext

log = logging.getLogger(__name__)

STALE_SPLIT_SECONDS = 2 * SPLIT_TIMEOUT_SECONDS
"""How long a document may stay ``splitting`` before its split task is queued again."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep queued."""

    finishes: int
    splits: int


class GroupSweeper:
    """One sweep at a time: :meth:`sweep_once` is what its background loop repeats."""

    def __init__(self, ctx: TaskContext, stale_split_seconds: float = STALE_SPLIT_SECONDS) -> None:
        self._ctx = ctx
        self._stale_split_seconds = stale_split_seconds

    def sweep_once(self) -> SweepReport:
        """Queue the finish of every finishable group and the split of every stale document."""
        finishable, stale = run_sync(self._find())
        for kind, group_id in finishable:
            log.warning("sweeper: %s %s has a row for every job but is not finished; finishing it", kind, group_id)
            self._ctx.enqueue(FINISH, kind, group_id)
        for document_id in stale:
            log.warning("sweeper: document %s is still splitting; queueing its split again", document_id)
            self._ctx.enqueue(SPLIT, document_id)
        return SweepReport(finishes=len(finishable), splits=len(stale))

    async def _find(self) -> tuple[list[tuple[str, str]], list[str]]:
        """The finishable groups and the stale documents, as the database knows them."""
        async with self._ctx.group_store() as store:
            return await store.finishable_groups(), await store.stale_splits(self._stale_split_seconds)
