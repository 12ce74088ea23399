"""The per-key limit on a tenant's unfinished jobs, admitted atomically before anything is queued.

The HTTP API admits jobs, runs and batches with it before it queues them; the orchestrator reserves a
document's segments with it when the document is split (a document's number of jobs is known only
then), so it lives here, below both.

SUBMIT adds each of a tenant's jobs to the tenant's sorted set and FINISH removes it, so the
set's size is the tenant's queued and running jobs. Admission is one Lua script (RESERVE,
``broker/scripts/reserve.lua``) that prunes stale members, counts the set and the tenant's open
reservations and, only if the new jobs fit, reserves them in the same step: two requests racing
for the last places cannot both get them. A submission that names its jobs (``POST /v1/jobs``)
reserves their ids; one too large to name at once (a run, a batch) reserves a number, and
claims its jobs' ids chunk by chunk before they are submitted. A job already counted (a
re-submitted id, an idempotency key already used) is not counted again.

What a failed submission reserved is given back (:meth:`Reservation.release`); if even that
fails, its reserved jobs age out of the set after :data:`LEASE_SECONDS`, as does a reservation
nobody claims from, so a lost release never shrinks the tenant's allowance for good. A member
that outlived the state records' TTL belongs to a job whose record expired before it finished
(FINISH could not see its tenant): those are dropped before counting.

**With several Redis shards** (``DRAGOMAN_REDIS_SHARDS``) a tenant's unfinished jobs are one set per
shard (each job in its own shard's), and the limit is on their sum. Admission reads the other
shards' counts (one pipelined round trip), then the tenant's *home* shard (``shard_of(tenant)``)
admits atomically with that sum added and holds the reservations (``broker/scripts/reserve.py``).
What is exact and what is not:

- Two admissions of one tenant are decided one after the other on its home shard, each seeing the
  other's reservation: concurrent requests never share the last places through the home shard.
- Jobs on other shards are read one round trip before the decision. A job of another submission
  that moves onto another shard's set *and* off that submission's reservation inside that window
  (a claim of a run's or batch's chunk, or a ``POST /v1/jobs`` whose jobs were queued and released)
  is missed by this decision, so the limit can be passed by at most the jobs other submissions of
  the same tenant moved that way during one round trip: at most :data:`CLAIM_CHUNK` per running
  claim, in practice a few milliseconds' worth. Claims add a chunk's jobs to their shards' sets
  before taking them off the reservation, and named jobs of other shards stay counted in the
  reservation until it is released, so a job in flight is counted twice for a moment rather than
  missed; the error on that side is a refusal while the tenant is within a round trip of its limit.
- With one shard everything is one script call on shard 0: exact, as before.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.queued_jobs import count_queued
from broker.scripts import ReserveScript
from contract.errors import DragomanError
from contract.schemas import JobSpec

RETRY_AFTER_SECONDS = 10

LEASE_SECONDS = 600
"""How long a reservation, or a reserved job not yet submitted, holds its place without being renewed.

Each claim renews a reservation, so this bounds the time between two chunks of one submission,
not a whole submission."""

CLAIM_CHUNK = 1_000
"""Job ids claimed in one round trip while a run or batch is queued."""


class TooManyQueuedJobsError(DragomanError):
    """The tenant has too many unfinished jobs to queue these now; retry once some have finished."""

    def __init__(self, message: str, retry_after: int | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Reservation:
    """Places a submission holds in a tenant's allowance until its jobs are queued.

    Jobs named when admitted are members of the tenant's set already; ``counted`` more may be
    claimed by id (:meth:`claim`, before each chunk is submitted). :meth:`release` gives back
    what was not used; it is safe to call after success too.
    """

    def __init__(
        self,
        redis_client: aioredis.Redis | None,
        script: ReserveScript | None,
        tenant: str,
        token: str,
        job_ids: Sequence[str] = (),
    ) -> None:
        self._redis = redis_client
        self._script = script
        self._tenant = tenant
        self._token = token
        self._job_ids = list(job_ids)

    @classmethod
    def unlimited(cls) -> Reservation:
        """A reservation for a submission no limit applies to: claiming and releasing do nothing."""
        return cls(None, None, "", "")

    async def claim(self, job_ids: Sequence[str]) -> None:
        """Count ``job_ids`` (about to be submitted) in the tenant's set, off this reservation's number."""
        if self._script is None or self._redis is None or not job_ids:
            return
        await self._script.claim(self._redis, self._tenant, self._token, job_ids, time.time())

    async def claiming(self, specs: AsyncIterator[JobSpec]) -> AsyncIterator[JobSpec]:
        """``specs`` as they come, each chunk of :data:`CLAIM_CHUNK` claimed before its first job is handed on."""
        chunk: list[JobSpec] = []
        async for spec in specs:
            chunk.append(spec)
            if len(chunk) >= CLAIM_CHUNK:
                await self.claim([job.job_id for job in chunk])
                for job in chunk:
                    yield job
                chunk = []
        await self.claim([job.job_id for job in chunk])
        for job in chunk:
            yield job

    async def release(self, unused: Sequence[str] | None = None) -> None:
        """Give back the unclaimed number and the named jobs that were not queued (all named ones, or ``unused``).

        Only a job whose state record is missing or final leaves the set: one that was queued stays counted.
        """
        if self._script is None or self._redis is None:
            return
        job_ids = self._job_ids if unused is None else list(unused)
        if not self._token and not job_ids:
            return
        await self._script.release(self._redis, self._tenant, self._token, job_ids)


class QueuedJobLimit:
    """Counts a tenant's unfinished jobs and admits a submission only if it keeps the tenant within its limit."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys, state_ttl_seconds: int) -> None:
        self._redis = redis_client
        self._keys = keys
        self._state_ttl = state_ttl_seconds
        self._script = ReserveScript(keys, state_ttl_seconds, LEASE_SECONDS)

    async def count(self, tenant: str, now: float | None = None) -> int:
        """The tenant's unfinished jobs and open reservations (stale members and lapsed reservations dropped)."""
        now = time.time() if now is None else now
        return await count_queued(self._redis, self._keys, tenant, now, self._state_ttl)

    async def admit_jobs(self, tenant: str, limit: int, jobs: Sequence[tuple[JobSpec, str | None]]) -> Reservation:
        """Reserve ``jobs`` (``(spec, idempotency key)``) by id, or raise :class:`TooManyQueuedJobsError`.

        A job whose idempotency key is taken already, or whose id is counted already, takes no place.
        Release the reservation (:meth:`Reservation.release`) once they are submitted or have failed.
        """
        _check_size(len(jobs), limit)
        named = [(spec.job_id, idempotency_key) for spec, idempotency_key in jobs]
        admission = await self._script.admit(self._redis, tenant, limit, time.time(), jobs=named)
        if not admission.admitted:
            raise _too_many(admission.queued, len(jobs), limit)
        # The token holds the named jobs of shards other than the tenant's home shard until they are queued.
        return Reservation(self._redis, self._script, tenant, admission.token, [job_id for job_id, _ in named])

    async def reserve(self, tenant: str, limit: int, adding: int) -> Reservation:
        """Reserve ``adding`` places, claimed by id as jobs are submitted; :class:`TooManyQueuedJobsError` if full."""
        _check_size(adding, limit)
        token = uuid.uuid4().hex
        admission = await self._script.admit(self._redis, tenant, limit, time.time(), token=token, counted=adding)
        if not admission.admitted:
            raise _too_many(admission.queued, adding, limit)
        return Reservation(self._redis, self._script, tenant, token)

    @contextlib.asynccontextmanager
    async def reserved(self, tenant: str, limit: int | None, adding: int) -> AsyncIterator[Reservation]:
        """:meth:`reserve` (nothing, with no ``limit``), released when the block ends, however it ends."""
        reservation = Reservation.unlimited() if limit is None else await self.reserve(tenant, limit, adding)
        try:
            yield reservation
        finally:
            with contextlib.suppress(Exception):  # a lost release ages out (LEASE_SECONDS)
                await reservation.release()

    async def check(self, tenant: str, limit: int, adding: int) -> None:
        """Raise :class:`TooManyQueuedJobsError` unless ``adding`` more jobs fit now; reserves nothing.

        For a document at its submission, whose number of jobs is known only once it is split (the split then
        reserves them), and for a held document's split, to see cheaply whether its segments fit now.
        """
        _check_size(adding, limit)
        admission = await self._script.admit(self._redis, tenant, limit, time.time(), counted=adding)
        if not admission.admitted:
            raise _too_many(admission.queued, adding, limit)


def _check_size(adding: int, limit: int) -> None:
    """A submission larger than the limit itself can never go in: its error carries no retry time."""
    if adding > limit:
        raise TooManyQueuedJobsError(
            f"{adding:,} jobs in one submission, over this key's limit of {limit:,} unfinished jobs; "
            "split it, or ask for a higher limit (dragoman api-key create --max-queued-jobs)",
            None,
        )


def _too_many(queued: int, adding: int, limit: int) -> TooManyQueuedJobsError:
    return TooManyQueuedJobsError(
        f"this key has {queued:,} unfinished jobs; {adding:,} more would pass its limit of {limit:,}. "
        f"Retry in {RETRY_AFTER_SECONDS}s, once some have finished",
        RETRY_AFTER_SECONDS,
    )
