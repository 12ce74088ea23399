"""The RQ worker ``dragoman rq-worker`` runs its tasks in: a task's typed failure is one log line, not a traceback.

RQ logs every exception a task raises with its traceback (``Worker.handle_exception``). The
orchestrator's tasks raise typed errors (:class:`~contract.errors.DragomanError`) for what is not
a bug in them: a webhook receiver that answered 500 or could not be reached in time
(:class:`~orchestrator.webhooks.WebhookDeliveryError`), a finish asked for before every row was
written (``GroupNotCompleteError``); RQ retries each. Their message says what and why, and a
traceback through dragoman's own frames only buried it (a receiver down for an hour wrote one per
try). :class:`TaskWorker` logs such a failure as one warning line: the task, its job, the error and
whether RQ tries it again. Anything else (a bug) keeps RQ's traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from rq import SimpleWorker
from rq.exceptions import DeserializationError
from rq.job import Job
from rq.job_lifecycle import call_exception_handlers

from contract.errors import DragomanError

log = logging.getLogger(__name__)


def _task_name(job: Job) -> str:
    try:
        return str(job.func_name).rpartition(".")[2]
    except DeserializationError:
        return "<a task that cannot be read>"


class TaskWorker(SimpleWorker):
    """RQ's ``SimpleWorker`` (tasks run in this process) logging a task's typed failure as one line."""

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """One warning line for a :class:`~contract.errors.DragomanError`; RQ's traceback for anything else.

        The exception handlers RQ keeps (none by default) are called either way.
        """
        error: BaseException | None = exc_info[1] if len(exc_info) > 1 else None
        if not isinstance(error, DragomanError):
            super().handle_exception(job, *exc_info)
            return
        outcome = "RQ tries it again" if job.should_retry else "no tries left"
        log.warning(
            "task %s (job %s) failed: %s: %s; %s", _task_name(job), job.id, type(error).__name__, error, outcome
        )
        call_exception_handlers(self._exc_handlers, job, *exc_info)
