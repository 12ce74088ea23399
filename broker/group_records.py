"""The Redis record of a run or document: what the worker's finish script counts a group's jobs against.

Written before the group's jobs are queued, deleted by the orchestrator once the group's row is
final (it expires with the jobs' state records anyway; see ``broker/scripts/finish.lua``).

**Parts.** With ``DRAGOMAN_REDIS_SHARDS`` above 1 a group's jobs spread over the shards (job
``n`` of group ``g`` is ``job_id_for(g, n)`` and lives on ``shard_of`` of that id), and the finish
script runs on one shard's keys. So the record is written on every shard, each *part* with the
number of the group's jobs that live on that shard (0 allowed): the finish script completes each
part on its own shard (one completion entry per part, on that shard's completions stream), and the
group is complete once every part is (:func:`incomplete_parts`). With one shard the one part is
the whole group, under the names it always had.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from contract.ids import job_id_for, shard_of


def part_totals(group_id: str, total: int, shard_count: int, skipped: Collection[int] = ()) -> list[int]:
    """How many of the group's jobs live on each shard: jobs ``0 .. total - 1`` but those in ``skipped``
    (lines never queued, e.g. a batch's lines naming a model nobody serves).

    With one shard no id is derived: the one part is ``total - len(skipped)``.
    """
    if shard_count <= 1:
        return [total - len(skipped)]
    totals = [0] * shard_count
    for sequence in range(total):
        if sequence not in skipped:
            totals[shard_of(job_id_for(group_id, sequence), shard_count)] += 1
    return totals


async def register_group(
    client: aioredis.Redis,
    keys: RedisKeys,
    group_id: str,
    kind: str,
    totals: Sequence[int],
    ttl_seconds: int,
    tenant: str | None = None,
) -> None:
    """Write the record of a run or document (``kind``: ``"run"`` or ``"document"``) on every shard, each
    part with its number of jobs (``totals[n]``: shard ``n``'s, :func:`part_totals`) and the ``tenant`` it
    belongs to, if any (the dispatcher queues its finish in that tenant's turn: :func:`group_tenant`).

    One MULTI/EXEC per shard (a part's keys share its shard's tag); the parts are written concurrently.
    """
    if len(totals) != keys.shard_count:
        raise ValueError(f"{len(totals)} part totals given for a deployment of {keys.shard_count} shards")

    async def write(shard: RedisKeys, total: int) -> None:
        key = shard.group(group_id)
        async with client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"kind": kind, "id": group_id, "total": total})
            if tenant is not None:
                pipe.hset(key, "tenant", tenant)
            pipe.expire(key, ttl_seconds)
            await pipe.execute()

    await asyncio.gather(*(write(shard, total) for shard, total in zip(keys.shards, totals, strict=True)))


async def group_tenant(client: aioredis.Redis, keys: RedisKeys, group_id: str) -> str | None:
    """The tenant of a run or document as its record on ``keys``' shard says (None: no tenant, or no record)."""
    tenant = await client.hget(keys.group(group_id), "tenant")
    return tenant.decode() if isinstance(tenant, bytes) else tenant


async def incomplete_parts(client: aioredis.Redis, keys: RedisKeys, group_id: str) -> list[int]:
    """The shards whose part of the group is not complete yet: its record is there, with a total above 0,
    and its done-set holds fewer job ids than that total.

    A part whose record is gone (the group finished and was forgotten, or the record expired) counts as
    complete: nothing will ever complete it, and the finish task counts the group's rows in PostgreSQL
    anyway (a group finished too early is retried there until every row is in). A part of total 0 never
    gets a completion entry of its own, so it is complete from the start.
    """

    async def incomplete(shard: RedisKeys) -> bool:
        async with client.pipeline(transaction=False) as pipe:  # one shard's keys: one slot on a cluster
            pipe.hget(shard.group(group_id), "total")
            pipe.scard(shard.group_done(group_id))
            total, done = await pipe.execute()
        return total is not None and int(total) > 0 and int(done) < int(total)

    found = await asyncio.gather(*(incomplete(shard) for shard in keys.shards))
    return [shard for shard, missing in enumerate(found) if missing]


async def forget_group(client: aioredis.Redis, keys: RedisKeys, group_id: str) -> None:
    """Delete a finished group's record and done-set now, on every shard (their TTL would take them later)."""
    # Each DEL names one shard's two keys: one hash tag, so one command even on a cluster.
    await asyncio.gather(*(client.delete(shard.group(group_id), shard.group_done(group_id)) for shard in keys.shards))
