"""FINISH (``finish.lua``): ack a committed batch, finalise its state records, publish its events.

Each event goes to the shared events stream (``DRAGOMAN_EVENTS_MAXLEN``, the wire format's), and an
event of a job with a tenant to that tenant's own events stream too (:meth:`~broker.keys.RedisKeys.tenant_events`),
trimmed by the tenant's own retention: :class:`TenantEventRetention`. ``GET /v1/events`` reads only
the tenant's: however many events other tenants' jobs write, a replay reads its own and no others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript
from contract.wire import SCHEMA_VERSION, JobEvent

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

_LUA = LuaScript("finish.lua")


class FinishedJob(msgspec.Struct, frozen=True):
    """One job whose final row is committed: its event, the run or document it belongs to, and its tenant.

    The tenant (the spec's, which SUBMIT also wrote in the state record) names the tenant's
    unfinished-jobs set the script takes the job out of, and goes into the job's event.
    """

    event: JobEvent
    group_id: str | None = None  # run id or document id
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class TenantEventRetention:
    """How much of a tenant's own events stream is kept: at most ``maxlen`` entries (about: Redis trims whole
    nodes), none older than ``seconds`` (by the clock FINISH is given), and the stream itself only while
    written within ``seconds``."""

    maxlen: int = 10_000
    seconds: int = 86_400


class FinishScript:
    """Finishes batches of one deployment: its key names, the finished TTL, the events streams' lengths."""

    def __init__(
        self,
        keys: RedisKeys,
        finished_ttl: int,
        events_maxlen: int,
        tenant_events: TenantEventRetention | None = None,
    ) -> None:
        self._keys = keys
        self._finished_ttl = finished_ttl
        self._events_maxlen = events_maxlen
        self._tenant_events = tenant_events or TenantEventRetention()

    def layout(
        self, entry_ids: Sequence[str], jobs: Sequence[FinishedJob], now: float, bulk_entry_ids: Sequence[str] = ()
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that ack ``entry_ids`` (interactive lane) and ``bulk_entry_ids`` and finish
        ``jobs``, counted in the second of ``now``."""
        keys = self._keys
        tenants: dict[str, int] = {}  # tenant -> its number in ARGV (1-based), in order of first appearance
        groups: dict[str, int] = {}
        per_job: list[Arg] = []
        states: list[str] = []
        for job in jobs:
            event, group, tenant = job.event, job.group_id, job.tenant
            states.append(keys.state(event.job_id))
            per_job += (
                event.job_id,
                event.status.value,
                repr(event.finished_at),
                event.error or "",
                event.to_json(),
                tenants.setdefault(tenant, len(tenants) + 1) if tenant else 0,
                groups.setdefault(group, len(groups) + 1) if group else 0,
            )
        script_keys = [
            keys.jobs_stream,
            keys.events_stream,
            keys.finished_in_second(int(now)),
            keys.completions_stream,
            keys.bulk_jobs_stream,
            *states,
            *(keys.tenant_queued(tenant) for tenant in tenants),
            *(keys.tenant_events(tenant) for tenant in tenants),
        ]
        for group in groups:
            script_keys += (keys.group(group), keys.group_done(group))
        args: list[Arg] = [
            keys.consumer_group,
            keys.events_channel,
            self._finished_ttl,
            self._events_maxlen,
            SCHEMA_VERSION,
            len(jobs),
            len(tenants),
            len(groups),
            len(entry_ids),
            *entry_ids,
            len(bulk_entry_ids),
            *bulk_entry_ids,
            *per_job,
            *tenants,
            *groups,
            self._tenant_events.maxlen,
            f"{max(0, int((now - self._tenant_events.seconds) * 1000))}-0",
            self._tenant_events.seconds * 1000,
        ]
        return script_keys, args

    def queue_on(
        self,
        pipe: AsyncPipeline,
        entry_ids: Sequence[str],
        jobs: Sequence[FinishedJob],
        now: float,
        bulk_entry_ids: Sequence[str] = (),
    ) -> None:
        """Queue the finish on an asyncio pipeline (a MULTI/EXEC one, beside the dead-letter writes)."""
        _LUA.queue_on(pipe, *self.layout(entry_ids, jobs, now, bulk_entry_ids))

    async def call(
        self,
        client: aioredis.Redis,
        entry_ids: Sequence[str],
        jobs: Sequence[FinishedJob],
        now: float,
        bulk_entry_ids: Sequence[str] = (),
    ) -> int:
        """Finish a batch on its own; return how many entries it acknowledged (tried to)."""
        return int(await _LUA.run(client, *self.layout(entry_ids, jobs, now, bulk_entry_ids)))
