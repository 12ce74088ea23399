"""Writing validated jobs to Redis and cancelling them: the one path every front door submits through.

The :class:`~producer.client.Client` and the run and document submitters share one
:class:`JobSubmitter`, so a job reaches the queue the same way whoever sends it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import redis

from contract.keys import RedisKeys
from contract.schemas import JobSpec
from contract.scripts import CancelOutcome, CancelScript, SubmitScript
from contract.settings import Settings


class JobSubmitter:
    """Submits and cancels jobs on one Redis connection, pipelined in chunks."""

    def __init__(self, redis_client: redis.Redis, keys: RedisKeys, settings: Settings) -> None:
        self.redis = redis_client
        self.keys = keys
        self.settings = settings
        self._submit = SubmitScript(keys, settings.state_ttl_seconds, settings.idempotency_ttl_seconds)
        self._cancel = CancelScript(keys)

    def write(self, prepared: Sequence[tuple[JobSpec, str | None]]) -> list[str]:
        """Submit ``(spec, idempotency key)`` pairs in one pipelined round trip; return the job ids.

        With an idempotency key already used, the id returned is the first job's.
        """
        return self._submit.call_many(self.redis, prepared)

    def submit_specs(self, specs: Sequence[JobSpec]) -> int:
        """Enqueue already validated jobs (ids and group fields set by the caller) in chunks; return how many."""
        chunk = self.settings.submit_chunk_size
        for start in range(0, len(specs), chunk):
            self.write([(spec, None) for spec in specs[start : start + chunk]])
        return len(specs)

    def register_group(self, group_id: str, kind: str, total: int) -> None:
        """Write the record of a run or document that the worker's finish script counts jobs against.

        ``kind`` is ``"run"`` or ``"document"``; the record expires with the jobs' state records
        (see ``contract/scripts/finish.lua``). Register before submitting the group's jobs.
        """
        key = self.keys.group(group_id)
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"kind": kind, "id": group_id, "total": total})
            pipe.expire(key, self.settings.state_ttl_seconds)
            pipe.execute()

    def cancel(self, job_id: str) -> CancelOutcome:
        """Run the cancel script for one job; return its outcome."""
        return self._cancel.call(self.redis, job_id, time.time())

    def cancel_many(self, job_ids: Sequence[str]) -> None:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are."""
        chunk = self.settings.submit_chunk_size
        now = time.time()
        for start in range(0, len(job_ids), chunk):
            self._cancel.call_many(self.redis, job_ids[start : start + chunk], now)
