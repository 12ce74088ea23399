"""The per-key limit on a tenant's unfinished jobs: checked before the HTTP API queues anything.

SUBMIT adds each of a tenant's jobs to the tenant's sorted set and FINISH removes it, so the
set's size is the tenant's queued and running jobs. A member that outlived the state records'
TTL belongs to a job whose record expired before it finished (FINISH could not see its tenant):
those are dropped before counting, so a lost removal heals by itself instead of shrinking the
tenant's allowance for ever. The check and the submit are not one atomic step: requests that
race may go past the limit by what they carry, never by more.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.queued_jobs import count_queued
from contract.errors import DragomanError

RETRY_AFTER_SECONDS = 10


class TooManyQueuedJobsError(DragomanError):
    """The tenant has too many unfinished jobs to queue these now; retry once some have finished."""

    def __init__(self, message: str, retry_after: int | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QueuedJobLimit:
    """Counts a tenant's unfinished jobs and refuses a submission that would pass its limit."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys, state_ttl_seconds: int) -> None:
        self._redis = redis_client
        self._keys = keys
        self._state_ttl = state_ttl_seconds

    async def count(self, tenant: str, now: float | None = None) -> int:
        """The tenant's unfinished jobs (stale members dropped first)."""
        now = time.time() if now is None else now
        return await count_queued(self._redis, self._keys, tenant, now, self._state_ttl)

    async def admit(self, tenant: str, limit: int, adding: int, *, counted: int | None = None) -> None:
        """Raise :class:`TooManyQueuedJobsError` unless ``adding`` more jobs keep the tenant within ``limit``.

        ``counted``: the tenant's count read moments ago (with the request's rate limit); when it
        leaves room, no round trip is made. Otherwise the set is pruned and counted again first.
        A submission larger than the limit itself can never go in: its error carries no retry time.
        """
        if adding > limit:
            raise TooManyQueuedJobsError(
                f"{adding:,} jobs in one submission, over this key's limit of {limit:,} unfinished jobs; "
                "split it, or ask for a higher limit (dragoman api-key create --max-queued-jobs)",
                None,
            )
        if counted is not None and counted + adding <= limit:
            return
        queued = await self.count(tenant)
        if queued + adding > limit:
            raise TooManyQueuedJobsError(
                f"this key has {queued:,} unfinished jobs; {adding:,} more would pass its limit of {limit:,}. "
                f"Retry in {RETRY_AFTER_SECONDS}s, once some have finished",
                RETRY_AFTER_SECONDS,
            )
