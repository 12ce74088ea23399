"""RESERVE (``reserve.lua``): a tenant's allowance of unfinished jobs, admitted, claimed and released atomically.

**Shards.** A tenant's unfinished jobs are one set per shard (SUBMIT and FINISH keep each job in its
own shard's set), and its reservations one hash on its *home* shard (``shard_of(tenant)``). The
script runs on one shard's keys, so admission takes two round trips with several shards: the
other shards are counted first (each prunes and counts its set, and says which of the named jobs
that live there would count; one pipelined round trip), then the home shard admits atomically with
their count added to its own, reserving the other shards' new named jobs as a number under a token
(they enter their own shard's set when SUBMIT queues them; releasing the reservation drops the
token). A claim adds each shard's ids to that shard's set first, then takes the number off the
token on the home shard. See ``broker/queued_limit.py`` for what is exact and what can overshoot.
With one shard every call is one script call on shard 0, as before.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript
from contract.ids import shard_of

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

_LUA = LuaScript("reserve.lua")

Layout = tuple[list[str], list[Arg]]


class Admission(NamedTuple):
    """What ``admit`` found: whether the jobs went in, and the tenant's count (every shard's) before them.

    ``token``: the reservation holding the admitted named jobs of shards other than the tenant's
    home shard until they are queued ('' if none): release it once they are.
    """

    admitted: bool
    queued: int
    token: str = ""


class ReserveScript:
    """Admits a tenant's jobs against its limit in one atomic step (see ``reserve.lua``).

    ``state_ttl``: the state records' TTL, past which a member of the tenant's set is stale;
    ``lease``: how long a reservation (and a reserved job not yet submitted) holds its place
    without being renewed.
    """

    def __init__(self, keys: RedisKeys, state_ttl: int, lease: int) -> None:
        self._keys = keys
        self._shards = keys.shards
        self._state_ttl = state_ttl
        self._lease = lease

    def home(self, tenant: str) -> RedisKeys:
        """The names of ``tenant``'s home shard, where its reservations live and admission is decided."""
        return self._shards[shard_of(tenant, len(self._shards))]

    def _by_shard(self, job_ids: Sequence[str]) -> dict[int, list[str]]:
        """``job_ids`` grouped by the shard each lives on (input order kept within a shard)."""
        grouped: dict[int, list[str]] = defaultdict(list)
        for job_id in job_ids:
            grouped[shard_of(job_id, len(self._shards))].append(job_id)
        return grouped

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
        elsewhere: int = 0,
        shard: RedisKeys | None = None,
    ) -> Layout:
        """KEYS and ARGV admitting ``jobs`` (``(job id, idempotency key or None)``, reserved by id) and
        ``counted`` more jobs reserved under ``token`` (a number, claimed by id later) on ``shard`` (None: the
        tenant's home shard), with ``elsewhere`` jobs of the tenant counted on its other shards."""
        keys = self.home(tenant) if shard is None else shard
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
            elsewhere,
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
        """Count the tenant's unfinished jobs and reservations on every shard (stale ones dropped) and, only if
        ``jobs`` and ``counted`` keep it within ``limit``, reserve them; what was found. A ``limit`` of -1 only
        counts."""
        home = self.home(tenant)
        by_shard: dict[int, list[tuple[str, str | None]]] = defaultdict(list)
        for job in jobs:
            by_shard[shard_of(job[0], len(self._shards))].append(job)
        others = [keys for keys in self._shards if keys.shard != home.shard or limit < 0]
        elsewhere = fresh_elsewhere = 0
        if others:

            def queue(pipe: AsyncPipeline) -> None:
                for keys in others:
                    layout = self.admit_layout(tenant, -1, now, jobs=by_shard.get(keys.shard, ()), shard=keys)
                    pipe.evalsha(_LUA.sha, len(layout[0]), *layout[0], *layout[1])

            replies: list[Any] = await _LUA.run_pipelined(client, queue)
            elsewhere = sum(int(reply[1]) for reply in replies)
            fresh_elsewhere = sum(int(reply[2]) for reply in replies)
            if limit < 0:
                return Admission(False, elsewhere)
        if fresh_elsewhere and not token:
            token = uuid.uuid4().hex
        layout = self.admit_layout(
            tenant,
            limit,
            now,
            jobs=by_shard.get(home.shard, ()),
            token=token,
            counted=counted + fresh_elsewhere,
            elsewhere=elsewhere,
            shard=home,
        )
        admitted, count, _ = await _LUA.run(client, *layout)
        return Admission(bool(admitted), int(count), token if admitted and (counted or fresh_elsewhere) else "")

    def claim_layout(
        self,
        tenant: str,
        token: str,
        job_ids: Sequence[str],
        now: float,
        *,
        taken: int | None = None,
        shard: RedisKeys | None = None,
    ) -> Layout:
        """KEYS and ARGV adding ``job_ids`` (all on ``shard``; None: the tenant's home shard) to the tenant's set
        there and taking ``taken`` (None: their number) off ``token``'s reserved number ('' for no token)."""
        shard = self.home(tenant) if shard is None else shard
        args: list[Arg] = [
            "claim",
            repr(now),
            token,
            self._lease,
            repr(self._reserved_score(now)),
            self._state_ttl,
            len(job_ids) if taken is None else taken,
            *job_ids,
        ]
        return [shard.tenant_queued(tenant), shard.tenant_reservations(tenant)], args

    async def claim(self, client: aioredis.Redis, tenant: str, token: str, job_ids: Sequence[str], now: float) -> int:
        """Add ``job_ids`` (about to be submitted) to their shards' sets of the tenant, then take their number off
        ``token``'s (its lease renewed, on the home shard); the number left on the token."""
        home = self.home(tenant)
        grouped = self._by_shard(job_ids)
        elsewhere = [(self._shards[shard], ids) for shard, ids in grouped.items() if shard != home.shard]
        if elsewhere:  # first: a job is counted twice for a moment, never missed

            def queue(pipe: AsyncPipeline) -> None:
                for keys, ids in elsewhere:
                    layout = self.claim_layout(tenant, "", ids, now, taken=0, shard=keys)
                    pipe.evalsha(_LUA.sha, len(layout[0]), *layout[0], *layout[1])

            await _LUA.run_pipelined(client, queue)
        layout = self.claim_layout(tenant, token, grouped.get(home.shard, []), now, taken=len(job_ids), shard=home)
        return int(await _LUA.run(client, *layout))

    def release_layout(
        self, tenant: str, token: str, job_ids: Sequence[str], *, shard: RedisKeys | None = None
    ) -> Layout:
        """KEYS and ARGV dropping ``token`` ('' for none) and each of ``job_ids`` (all on ``shard``; None: the
        tenant's home shard) that is not queued or running."""
        shard = self.home(tenant) if shard is None else shard
        script_keys = [shard.tenant_queued(tenant), shard.tenant_reservations(tenant)]
        script_keys += [shard.state(job_id) for job_id in job_ids]
        return script_keys, ["release", token, *job_ids]

    async def release(self, client: aioredis.Redis, tenant: str, token: str, job_ids: Sequence[str] = ()) -> None:
        """Give back ``token``'s unclaimed number and the reserved ``job_ids`` that were not queued (one round trip)."""
        home = self.home(tenant)
        grouped = self._by_shard(job_ids)
        grouped.setdefault(home.shard, [])

        def queue(pipe: AsyncPipeline) -> None:
            for shard, ids in grouped.items():
                keys = self._shards[shard]
                layout = self.release_layout(tenant, token if shard == home.shard else "", ids, shard=keys)
                pipe.evalsha(_LUA.sha, len(layout[0]), *layout[0], *layout[1])

        await _LUA.run_pipelined(client, queue)
