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
from contract.settings import Settings
from contract.state import CANCEL_SCRIPT, SUBMIT_SCRIPT
from contract.wire import encode_job_entry


class JobSubmitter:
    """Submits and cancels jobs on one Redis connection, pipelined in chunks."""

    def __init__(self, redis_client: redis.Redis, keys: RedisKeys, settings: Settings) -> None:
        self.redis = redis_client
        self.keys = keys
        self.settings = settings
        self._sha: str | None = None
        self._cancel = redis_client.register_script(CANCEL_SCRIPT)

    def write(self, prepared: Sequence[tuple[JobSpec, str | None]]) -> list[str]:
        """Submit ``(spec, idempotency key)`` pairs in one pipelined round trip; return the job ids.

        With an idempotency key already used, the id returned is the first job's.
        """
        keys = self.keys
        ttl, idem_ttl = self.settings.state_ttl_seconds, self.settings.idempotency_ttl_seconds
        for attempt in (1, 2):
            with self.redis.pipeline(transaction=False) as pipe:
                sha = self._submit_sha()
                for spec, idem in prepared:
                    fields = encode_job_entry(spec)
                    script_keys = [keys.jobs_stream, keys.state(spec.job_id)]
                    if idem is not None:
                        script_keys.append(keys.idempotency(idem))
                    # EVALSHA directly: redis-py's Script wrapper costs more per call than the rest.
                    pipe.evalsha(
                        sha,
                        len(script_keys),
                        *script_keys,
                        spec.job_id,
                        fields["payload"],
                        repr(spec.created_at),
                        spec.source_lang,
                        spec.target_lang,
                        ttl,
                        idem_ttl,
                        fields["v"],
                    )
                try:
                    return [str(job_id) for job_id in pipe.execute()]
                except redis.exceptions.NoScriptError:
                    # The server lost its script cache (a restart): no EVALSHA ran, so load and redo.
                    self._sha = None
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    def submit_specs(self, specs: Sequence[JobSpec]) -> int:
        """Enqueue already validated jobs (ids and group fields set by the caller) in chunks; return how many."""
        chunk = self.settings.submit_chunk_size
        for start in range(0, len(specs), chunk):
            self.write([(spec, None) for spec in specs[start : start + chunk]])
        return len(specs)

    def register_group(self, group_id: str, kind: str, total: int) -> None:
        """Write the record of a run or document that the worker's finish script counts jobs against.

        ``kind`` is ``"run"`` or ``"document"``; the record expires with the jobs' state records
        (see ``FINISH_SCRIPT``). Register before submitting the group's jobs.
        """
        key = self.keys.group(group_id)
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"kind": kind, "id": group_id, "total": total})
            pipe.expire(key, self.settings.state_ttl_seconds)
            pipe.execute()

    def cancel(self, job_id: str) -> str:
        """Run the cancel script for one job; return its outcome (see ``CANCEL_SCRIPT``)."""
        return str(self._cancel(keys=[self.keys.state(job_id)], args=self._cancel_args(job_id, repr(time.time()))))

    def cancel_many(self, job_ids: Sequence[str]) -> None:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are."""
        chunk = self.settings.submit_chunk_size
        now = repr(time.time())
        for start in range(0, len(job_ids), chunk):
            with self.redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids[start : start + chunk]:
                    self._cancel(keys=[self.keys.state(job_id)], client=pipe, args=self._cancel_args(job_id, now))
                pipe.execute()

    def _cancel_args(self, job_id: str, now: str) -> list[str | int]:
        return [now, self.settings.finished_state_ttl_seconds, self.keys.control_channel, job_id]

    def _submit_sha(self) -> str:
        if self._sha is None:
            self._sha = str(self.redis.script_load(SUBMIT_SCRIPT))
        return self._sha
