"""Writing validated jobs to Redis and cancelling them: the one path every front door submits through.

:class:`~producer.AsyncClient` (and so :class:`~producer.Client`, which runs it), the run and
document submitters, the HTTP API and the orchestrator's splitter share one :class:`JobSubmitter`,
so a job reaches the queue the same way whoever sends it. The script wrappers' ``layout`` is the
only code that knows each script's KEYS and ARGV.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Sequence

import redis
import redis.asyncio as aioredis

from broker.group_records import part_totals, register_group
from broker.keys import RedisKeys
from broker.scripts import CancelOutcome, CancelScript, SubmitScript
from broker.scripts.lua import Replication
from broker.scripts.submit import check_idempotency_shards
from broker.standalone_jobs import note_standalone
from contract.errors import SubmitInterruptedError, SubmitNotReplicatedError
from contract.schemas import JobSpec
from contract.settings import Settings
from contract.wording import counted
from producer.model_routing import ModelResolver

log = logging.getLogger(__name__)


class JobSubmitter:
    """Submits and cancels jobs on one asyncio Redis client, one pipelined round trip per chunk."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys, settings: Settings) -> None:
        self.redis = redis_client
        self.keys = keys
        self.settings = settings
        self.models = ModelResolver(redis_client, keys, settings)
        self._submit = SubmitScript(
            keys,
            settings.state_ttl_seconds,
            settings.idempotency_ttl_seconds,
            fair_share_buffer=settings.fair_share_buffer if settings.fair_share else None,
            wait=(
                Replication(settings.submit_wait_replicas, settings.submit_wait_timeout_ms)
                if settings.submit_wait_replicas > 0
                else None
            ),
        )
        self._cancel = CancelScript(keys)
        self._weights: dict[str, int] = {}  # tenant -> its API key's weight, as last seen here

    def note_tenant_weight(self, tenant: str, weight: int) -> None:
        """Remember ``tenant``'s weight (its API key's) for the lanes' rotations: its next staged job records it.

        The HTTP API calls this for each authenticated request; a process that never learns a
        tenant's weight (the orchestrator submitting a run's chunks) leaves the recorded one alone.
        """
        if weight <= 0:
            raise ValueError(f"a tenant's weight must be positive, not {weight}")
        self._weights[tenant] = weight

    async def write(self, prepared: Sequence[tuple[JobSpec, str | None]], *, only_new: bool = False) -> list[str]:
        """Submit ``(spec, idempotency key)`` pairs in pipelined chunks; return the job ids.

        With an idempotency key already used, the id returned is the first job's. With
        ``only_new``, a job whose state record exists is left as it is (see ``submit.lua``).
        Each job goes to its model's lanes (:class:`ModelResolver`); a job naming a model nobody
        serves raises :class:`~contract.errors.ModelNotFoundError` before anything is written.
        Each chunk is one round trip. If Redis fails after earlier chunks were queued,
        :class:`SubmitInterruptedError` carries their ids (the failed chunk's jobs may be
        partly queued); on the first chunk, Redis's own error is raised. Each job goes to its own
        shard (``RedisKeys.for_job``); a job whose id and idempotency key live on different shards
        raises :class:`~contract.errors.IdempotencyShardError` before anything is written.
        With ``DRAGOMAN_SUBMIT_WAIT_REPLICAS`` set, each chunk waits for that many replicas of every
        primary it wrote; fewer in time raises :class:`~contract.errors.SubmitNotReplicatedError`
        (its ``job_ids`` are queued; the chunks after it are not sent).
        """
        check_idempotency_shards(prepared, self.settings.redis_shards)
        specs = await self.models.assign([spec for spec, _ in prepared])
        prepared = [(spec, key) for spec, (_, key) in zip(specs, prepared, strict=True)]
        chunk = self.settings.submit_chunk_size
        ids: list[str] = []
        for start in range(0, len(prepared), chunk):
            try:
                batch = prepared[start : start + chunk]
                ids.extend(await self._submit.call_many(self.redis, batch, only_new=only_new, weights=self._weights))
            except SubmitNotReplicatedError as exc:
                raise _unreplicated(exc, [*ids, *exc.job_ids], len(prepared)) from None
            except redis.RedisError as exc:
                if not ids:
                    raise  # no earlier chunk was queued: the error as Redis gave it
                raise _interrupted(exc, ids, len(prepared), min(chunk, len(prepared) - start)) from exc
        await self._note_standalone(specs, ids)
        return ids

    async def _note_standalone(self, specs: Sequence[JobSpec], ids: Sequence[str]) -> None:
        """Add the tenants' new stand-alone jobs to their history's set of unfinished ones (``broker/standalone_jobs``).

        The jobs are queued already: a Redis error here is logged, not raised (the job then shows in
        ``GET /v1/jobs`` only once it has finished), so the caller is never told a queued job failed.
        """
        noted = [
            (spec.tenant, spec.job_id, spec.created_at)
            for spec, job_id in zip(specs, ids, strict=True)
            if spec.tenant is not None and spec.run_id is None and spec.document_id is None and job_id == spec.job_id
        ]
        try:
            await note_standalone(self.redis, self.keys, noted, self.settings.state_ttl_seconds)
        except redis.RedisError as exc:
            log.warning("could not note %d stand-alone jobs for the history: %s", len(noted), exc)

    async def submit_specs(self, specs: Sequence[JobSpec], *, only_new: bool = False) -> int:
        """Enqueue already validated jobs (ids and group fields set by the caller) in chunks; return how many.

        ``only_new``: jobs already queued or running are left alone (resuming a run, splitting again).
        """
        await self.write([(spec, None) for spec in specs], only_new=only_new)
        return len(specs)

    async def register_group(
        self, group_id: str, kind: str, total: int, *, skipped: Collection[int] = (), tenant: str | None = None
    ) -> None:
        """Write the record of a run or document that the worker's finish script counts jobs against.

        ``kind`` is ``"run"`` or ``"document"``; its jobs are numbers ``0 .. total - 1`` (``job_id_for``)
        but those in ``skipped`` (never queued). With several shards each shard gets its part, the
        number of those jobs that live on it (``broker/group_records.py``; the ids are hashed in a
        thread). The record expires with the jobs' state records (see ``broker/scripts/finish.lua``).
        ``tenant``: the API tenant the group is (its finish is queued in the tenant's turn). Register
        before submitting the group's jobs.
        """
        shards = self.keys.shard_count
        totals = (
            part_totals(group_id, total, shards, skipped)
            if shards <= 1
            else await asyncio.to_thread(part_totals, group_id, total, shards, skipped)
        )
        await register_group(
            self.redis, self.keys, group_id, kind, totals, self.settings.state_ttl_seconds, tenant=tenant
        )

    async def cancel(self, job_id: str) -> CancelOutcome:
        """Run the cancel script for one job; return its outcome."""
        return await self._cancel.call(self.redis, job_id, time.time())

    async def cancel_many(self, job_ids: Sequence[str]) -> list[CancelOutcome]:
        """Cancel many jobs, pipelined; ids that are unknown or already final are left as they are.

        Returns each job's outcome, in order (``MISSING``: no state record in Redis).
        """
        chunk = self.settings.submit_chunk_size
        now = time.time()
        outcomes: list[CancelOutcome] = []
        for start in range(0, len(job_ids), chunk):
            outcomes.extend(await self._cancel.call_many(self.redis, job_ids[start : start + chunk], now))
        return outcomes


def _unreplicated(exc: SubmitNotReplicatedError, queued: list[str], total: int) -> SubmitNotReplicatedError:
    """The error for a submit whose last chunk was queued but not confirmed by enough replicas in time."""
    return SubmitNotReplicatedError(
        f"{len(queued):,} of {counted(total, 'job')} ARE queued on the Redis primary but not yet replicated ({exc}): "
        "a failover now could lose them. Submitting again with the same idempotency keys (or, for a run, the same "
        "run id) is safe; check the replicas (DRAGOMAN_SUBMIT_WAIT_REPLICAS, DRAGOMAN_SUBMIT_WAIT_TIMEOUT_MS)",
        queued,
    )


def _interrupted(exc: Exception, written: list[str], total: int, in_flight: int) -> SubmitInterruptedError:
    """The error for a submit that Redis cut short after ``written`` were queued."""
    return SubmitInterruptedError(
        f"Redis failed after {len(written):,} of {counted(total, 'job')} were queued ({exc}); up to {in_flight:,} more "
        "may be queued. Submit again with idempotency keys (or, for a run, the same run id) to add only the "
        "missing ones",
        written,
    )
