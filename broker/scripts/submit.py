"""SUBMIT (``submit.lua``): a job's stream entry and state record in one atomic call.

With fair share on (``fair_share_buffer`` given), a tenant's job may go to the tenant's staging
stream instead of the lane (see ``broker/fair_share.py``); the script decides, atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript
from contract.schemas import JobSpec, lane_of
from contract.wire import encode_job_entry

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

_LUA = LuaScript("submit.lua")


class SubmitScript:
    """Queues jobs of one deployment: its key names and the TTLs of state records and idempotency keys."""

    def __init__(
        self,
        keys: RedisKeys,
        state_ttl: int,
        idempotency_ttl: int,
        *,
        fair_share_buffer: int | None = None,
        consumer_group: str | None = None,
    ) -> None:
        """``fair_share_buffer``: None for plain first-in first-out lanes; else a tenant's job is staged
        when the lane holds that many unread entries of ``consumer_group`` (default: the keys' group)."""
        self._keys = keys
        self._state_ttl = state_ttl
        self._idempotency_ttl = idempotency_ttl
        self._buffer = "" if fair_share_buffer is None else str(fair_share_buffer)
        self._group = consumer_group or keys.consumer_group

    def layout(
        self, spec: JobSpec, idempotency_key: str | None, only_new: bool = False, weight: int | None = None
    ) -> tuple[tuple[str, ...], tuple[Arg, ...]]:
        """KEYS and ARGV that queue ``spec`` (under the application's ``idempotency_key``, if any).

        ``only_new``: leave the job as it is if its state record exists (a resumed submission).
        ``weight``: the tenant's weight in the lanes' rotations (from its API key), recorded when the
        job is staged; None leaves the recorded one (1 if none).
        """
        keys = self._keys
        fair = bool(spec.tenant and self._buffer)
        fields = encode_job_entry(spec)
        # Tuples, built in one go: this runs once per job on the 20k jobs/s submit path.
        args = (
            spec.job_id,
            fields["payload"],
            repr(spec.created_at),
            spec.source_lang,
            spec.target_lang,
            self._state_ttl,
            self._idempotency_ttl,
            fields["v"],
            spec.tenant or "",
            "1" if only_new else "0",
            "0" if idempotency_key is None else "1",
            spec.model or "",
            self._buffer if fair else "",
            self._group,
            "" if weight is None else weight,
        )
        lane = keys.lane(lane_of(spec), spec.model)
        script_keys: tuple[str, ...] = (lane, keys.state(spec.job_id))
        if idempotency_key is not None:
            script_keys += (keys.idempotency(idempotency_key, spec.tenant),)
        if spec.tenant:
            script_keys += (keys.tenant_queued(spec.tenant),)
            if fair:
                script_keys += (keys.staging(lane, spec.tenant), keys.rotation(lane), keys.tenant_weights)
        return script_keys, args

    async def call_many(
        self,
        client: aioredis.Redis,
        prepared: Sequence[tuple[JobSpec, str | None]],
        *,
        only_new: bool = False,
        weights: Mapping[str, int] | None = None,
    ) -> list[str]:
        """Queue ``(spec, idempotency key)`` pairs in one pipelined round trip; the job ids, in order.

        A job submitted under an ``idempotency_key`` already used answers the first job's id.
        ``weights``: tenant -> weight, for the tenants whose API key's weight is known here.
        """
        known = weights or {}

        def queue(pipe: AsyncPipeline) -> None:
            for spec, idempotency_key in prepared:
                weight = known.get(spec.tenant) if spec.tenant else None
                keys, args = self.layout(spec, idempotency_key, only_new, weight)
                pipe.evalsha(_LUA.sha, len(keys), *keys, *args)

        return [str(job_id) for job_id in await _LUA.run_pipelined(client, queue)]
