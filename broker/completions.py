"""The completions streams (``{<prefix>}:completions``, one per shard): FINISH appends ``kind``/``id`` when a
shard's part of a run or document completes; the orchestrator's dispatcher reads each shard's stream with its
own consumer group and acknowledges each entry once it is handled (its finish task queued, or the group found
still waiting for another shard's part)."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def read_completions(
    client: aioredis.Redis, keys: RedisKeys, consumer: str, cursor: str, count: int, block_ms: int | None
) -> list[tuple[str, dict[str, str] | None]]:
    """Up to ``count`` entries of the completions stream of ``keys``' shard for ``consumer``: its own
    unacknowledged ones from ``cursor`` ``"0"``, new ones with ``">"`` (waiting up to ``block_ms``, if given).

    One stream per call: streams of several shards in one XREADGROUP is ``CROSSSLOT`` on a cluster. An own
    entry trimmed from the stream meanwhile has ``None`` fields. Raises redis-py's ``ResponseError``
    (``NOGROUP``) if the group is gone.
    """
    streams: dict[Any, Any] = {keys.completions_stream: cursor}
    response: Any = await client.xreadgroup(keys.orchestration_group, consumer, streams, count=count, block=block_ms)
    return [entry for _, entries in response or [] for entry in entries]


async def ack_completion(client: aioredis.Redis, keys: RedisKeys, entry_id: str) -> None:
    """Acknowledge one completion entry of ``keys``' shard (it is handled)."""
    await client.xack(keys.completions_stream, keys.orchestration_group, entry_id)
