"""RESERVE (``reserve.lua``): a tenant's allowance of unfinished jobs, admitted, claimed and released atomically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis

_LUA = LuaScript("reserve.lua")


class Admission(NamedTuple):
    """What ``admit`` found: whether the jobs went in, and the tenant's count before them."""

    admitted: bool
    queued: int


class ReserveScript:
    """Admits a tenant's jobs against its limit in one atomic step (see ``reserve.lua``).

    ``state_ttl``: the state records' TTL, past which a member of the tenant's set is stale;
    ``lease``: how long a reservation (and a reserved job not yet submitted) holds its place
    without being renewed.
    """

    def __init__(self, keys: RedisKeys, state_ttl: int, lease: int) -> None:
        self._keys = keys
        self._state_ttl = state_ttl
        self._lease = lease

    def _reserved_score(self, now: float) -> float:
        # Pruned `lease` seconds from now unless SUBMIT re-scores the member with its created_at.
        return now - self._state_ttl + self._lease

    def admit_layout(
        self,
        tenant: str,
        limit: int,
        now: float,
        *,
        jobs: Sequence[tuple[str, str | None]] = (),
        token: str = "",
        counted: int = 0,
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV admitting ``jobs`` (``(job id, idempotency key or None)``, reserved by id) and
        ``counted`` more jobs reserved under ``token`` (a number, claimed by id later)."""
        keys = self._keys
        script_keys = [keys.tenant_queued(tenant), keys.tenant_reservations(tenant)]
        indexes: list[Arg] = []
        for _, idempotency_key in jobs:
            if idempotency_key is None:
                indexes.append(0)
            else:
                script_keys.append(keys.idempotency(idempotency_key, tenant))
                indexes.append(len(script_keys))
        args: list[Arg] = [
            "admit",
            repr(now),
            repr(now - self._state_ttl),
            limit,
            token,
            counted,
            self._lease,
            repr(self._reserved_score(now)),
            self._state_ttl,
            len(jobs),
            *(job_id for job_id, _ in jobs),
            *indexes,
        ]
        return script_keys, args

    async def admit(
        self,
        client: aioredis.Redis,
        tenant: str,
        limit: int,
        now: float,
        *,
        jobs: Sequence[tuple[str, str | None]] = (),
        token: str = "",
        counted: int = 0,
    ) -> Admission:
        """Count the tenant's unfinished jobs and reservations (stale ones dropped) and, only if ``jobs`` and
        ``counted`` keep it within ``limit``, reserve them; what was found."""
        admitted, count = await _LUA.run(
            client, *self.admit_layout(tenant, limit, now, jobs=jobs, token=token, counted=counted)
        )
        return Admission(bool(admitted), int(count))

    def claim_layout(self, tenant: str, token: str, job_ids: Sequence[str], now: float) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV moving ``job_ids`` from ``token``'s reserved number into the tenant's set."""
        keys = self._keys
        args: list[Arg] = [
            "claim",
            repr(now),
            token,
            self._lease,
            repr(self._reserved_score(now)),
            self._state_ttl,
            *job_ids,
        ]
        return [keys.tenant_queued(tenant), keys.tenant_reservations(tenant)], args

    async def claim(self, client: aioredis.Redis, tenant: str, token: str, job_ids: Sequence[str], now: float) -> int:
        """Add ``job_ids`` (about to be submitted) to the tenant's set, off ``token``'s number (its lease
        renewed); the number left on the token."""
        return int(await _LUA.run(client, *self.claim_layout(tenant, token, job_ids, now)))

    def release_layout(self, tenant: str, token: str, job_ids: Sequence[str]) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV dropping ``token`` and each of ``job_ids`` that is not queued or running."""
        keys = self._keys
        script_keys = [keys.tenant_queued(tenant), keys.tenant_reservations(tenant)]
        script_keys += [keys.state(job_id) for job_id in job_ids]
        return script_keys, ["release", token, *job_ids]

    async def release(self, client: aioredis.Redis, tenant: str, token: str, job_ids: Sequence[str] = ()) -> None:
        """Give back ``token``'s unclaimed number and the reserved ``job_ids`` that were not queued."""
        await _LUA.run(client, *self.release_layout(tenant, token, job_ids))
