"""The completions stream (``{<prefix>}:completions``): FINISH appends ``kind``/``id`` when a run or document
completes; the orchestrator's dispatcher reads it with its own consumer group and acknowledges each entry
once its finish task is queued."""

from __future__ import annotations

from typing import Any

import redis

from broker.keys import RedisKeys


def read_completions(
    client: redis.Redis, keys: RedisKeys, consumer: str, cursor: str, count: int, block_ms: int | None
) -> list[tuple[str, dict[str, str] | None]]:
    """Up to ``count`` entries for ``consumer``: its own unacknowledged ones from ``cursor`` ``"0"``, new ones
    with ``">"`` (waiting up to ``block_ms``, if given). An own entry trimmed from the stream meanwhile has
    ``None`` fields. Raises redis-py's ``ResponseError`` (``NOGROUP``) if the group is gone."""
    streams: dict[Any, Any] = {keys.completions_stream: cursor}
    response: Any = client.xreadgroup(keys.orchestration_group, consumer, streams, count=count, block=block_ms)
    return [entry for _, entries in response or [] for entry in entries]


def ack_completion(client: redis.Redis, keys: RedisKeys, entry_id: str) -> None:
    """Acknowledge one completion entry (its finish task is queued)."""
    client.xack(keys.completions_stream, keys.orchestration_group, entry_id)
