"""The orchestrator's contract: the tasks other packages ask it to run, named as data.

Producers, the HTTP API's tenancy and the orchestrator itself queue orchestration work (split a
document, finish a run or document, deliver a webhook) on RQ, which finds a task by its dotted
name. The names live here, as strings, so that no package below the orchestrator imports it; the
orchestrator's ``tasks`` module must define a function under each name (its tests check that).
``broker.orchestration.enqueue_orchestration`` is the one function that queues them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OrchestratorTask:
    """One task of the orchestrator: the dotted name RQ runs, and the prefix of its idempotent job ids."""

    function: str
    job_id_prefix: str
    webhook: bool = False
    """Queued on the webhook queue (a slow receiver holds up no split or finish), retried a bounded number of times."""

    def job_id(self, *args: str) -> str:
        """The RQ job id of this task for ``args``: queueing the same work twice queues it once."""
        return "-".join((self.job_id_prefix, *args))


SPLIT = OrchestratorTask("orchestrator.tasks.split_document", "split")
"""Split a stored document into jobs; argument: the document id."""
FINISH = OrchestratorTask("orchestrator.tasks.finish_group", "finish")
"""Finish a run or assemble a document, exactly once; arguments: kind (``run``/``document``) and id."""
WEBHOOK = OrchestratorTask("orchestrator.tasks.deliver_webhook", "webhook", webhook=True)
"""POST a finished run's or document's status to its callback URL; arguments: kind and id."""
WEBHOOK_GAVE_UP = "orchestrator.tasks.webhook_gave_up"
"""RQ's failure callback of :data:`WEBHOOK`: after the last retry it marks the webhook failed."""

TASKS = (SPLIT, FINISH, WEBHOOK)

SPLIT_TIMEOUT_SECONDS = 600
"""RQ's time limit for one orchestration task (a document at ``DRAGOMAN_MAX_DOCUMENT_CHARS`` splits in seconds)."""
RESULT_TTL_SECONDS = 3_600
"""How long RQ keeps a finished task's result."""
UNCAPPED_RETRIES = 1_000_000
"""RQ's ``Retry(max=...)`` for tasks that must not give up (split, finish): at one try every
:data:`RETRY_MAX_SECONDS` that is years, so a run or document never lands in the failed registry
for an outage, however long."""
RETRY_MAX_SECONDS = 300
