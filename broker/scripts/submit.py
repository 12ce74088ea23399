"""SUBMIT (``submit.lua``): a job's stream entry and state record in one atomic call.

Each job is queued on its own shard (``RedisKeys.for_job``): the script's KEYS are that shard's
lane, state record, idempotency key, tenant set and staging keys. A job submitted under an
idempotency key must live on the key's shard (:func:`~contract.ids.key_shard`), or a retry drawn with another id
would look for the key elsewhere and run the job twice: the producer draws such a job's id on the
key's shard (``producer/requests.py``), and a caller-chosen id on another shard is refused
(:func:`check_idempotency_shards`, :class:`~contract.errors.IdempotencyShardError`) before anything
is written.

With fair share on (``fair_share_buffer`` given), a tenant's job may go to the tenant's staging
stream instead of the lane (see ``broker/fair_share.py``); the script decides, atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript, Replication
from contract.errors import IdempotencyShardError
from contract.ids import key_shard, shard_of
from contract.schemas import JobSpec, lane_of
from contract.wire import encode_job_entry

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

_LUA = LuaScript("submit.lua")


def check_idempotency_shards(prepared: Sequence[tuple[JobSpec, str | None]], shards: int) -> None:
    """Raise :class:`IdempotencyShardError` (nothing written) for a job whose id and idempotency key live on
    different Redis shards (see the module docstring); the submitter checks a whole submission before its first chunk
    is sent."""
    if shards <= 1:
        return
    for spec, key in prepared:
        if key is not None and shard_of(spec.job_id, shards) != key_shard(key, spec.tenant, shards):
            raise IdempotencyShardError(
                f"job id {spec.job_id} and idempotency key {key!r} live on different Redis shards "
                f"(DRAGOMAN_REDIS_SHARDS={shards}): a retry under another id would miss the key and run the job "
                "twice. Leave the job id to dragoman (it places the job on the key's shard), or draw it with "
                "contract.ids.new_job_id_on_shard(contract.ids.key_shard(key, tenant, shards), shards)"
            )


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
        wait: Replication | None = None,
    ) -> None:
        """``fair_share_buffer``: None for plain first-in first-out lanes; else a tenant's job is staged
        when the lane holds that many unread entries of ``consumer_group`` (default: the keys' group).
        ``wait``: after each pipelined batch, WAIT for that many replicas of each primary written
        (``DRAGOMAN_SUBMIT_WAIT_REPLICAS``); None sends no WAIT."""
        self._wait = wait
        self._keys = keys
        self._shards = keys.shards  # every shard's names, built once: layout runs once per job
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
        keys = self._shards[shard_of(spec.job_id, len(self._shards))]
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
        With a ``wait``, fewer replicas in time raises :class:`~contract.errors.SubmitNotReplicatedError`
        (the jobs are queued: its ``job_ids`` are these ids).
        """
        known = weights or {}

        def queue(pipe: AsyncPipeline) -> None:
            for spec, idempotency_key in prepared:
                weight = known.get(spec.tenant) if spec.tenant else None
                keys, args = self.layout(spec, idempotency_key, only_new, weight)
                pipe.evalsha(_LUA.sha, len(keys), *keys, *args)

        return [str(job_id) for job_id in await _LUA.run_pipelined(client, queue, wait=self._wait)]
