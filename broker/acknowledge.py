"""A writer batch's last step on Redis: FINISH its entries and append its dead letters, in one MULTI/EXEC.

The worker's writer calls it once the batch's rows are committed (commit first, acknowledge
second). FINISH and the dead-letter copies go together: a job failed for good is acknowledged
exactly when its copy is in the dead-letter stream. Every key involved carries one shard's hash tag (the
shard the entries were read from), so the transaction is legal on a Redis Cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.scripts import FinishedJob, FinishScript


async def acknowledge_writer_batch(
    redis: aioredis.Redis,
    keys: RedisKeys,
    finish: FinishScript,
    jobs: Sequence[FinishedJob],
    now: float,
    entry_ids: tuple[Sequence[str], Sequence[str]],
    dead_letters: Sequence[Mapping[str, str]],
) -> None:
    """Acknowledge ``entry_ids`` (interactive lane, bulk lane), finish ``jobs`` and append ``dead_letters`` to the
    dead-letter stream, atomically, in one round trip."""
    interactive, bulk = entry_ids
    async with redis.pipeline(transaction=True) as pipe:
        finish.queue_on(pipe, interactive, jobs, now, bulk)
        for letter in dead_letters:
            pipe.xadd(keys.dead_letter_stream, dict[Any, Any](letter))
        await pipe.execute()
