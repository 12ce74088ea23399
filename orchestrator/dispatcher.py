"""Follows the completions stream and queues one :func:`~orchestrator.tasks.finish_group` per entry.

The worker's finish script appends an entry when the last job of a run or document is
committed; the dispatcher reads it with its own consumer group and acknowledges it only after
the RQ job is queued, so a crash in between queues it again (finishing is idempotent).
"""

from __future__ import annotations

import logging

import redis

from broker.completions import ack_completion, read_completions
from broker.consumer_groups import ensure_group
from broker.redis_client import open_redis
from contract.orchestration import FINISH
from contract.sync_bridge import run_sync
from orchestrator.context import TaskContext

log = logging.getLogger(__name__)


class CompletionDispatcher:
    """Moves completion entries into the RQ queue; :meth:`step` is what its background loop repeats."""

    def __init__(self, ctx: TaskContext, consumer: str = "dispatcher") -> None:
        self._ctx = ctx
        self._consumer = consumer
        self._redis: redis.Redis = redis.Redis.from_url(ctx.redis_url, decode_responses=True)

    def ensure_group(self) -> None:
        """Create the consumer group on the completions stream (from its start) if needed.

        Rare (at start, and when the group vanished), so it opens an asyncio connection of its own
        for the one implementation, run through the sync bridge.
        """
        keys = self._ctx.keys
        run_sync(_ensure_group(self._ctx.redis_url, keys.completions_stream, keys.orchestration_group))

    def dispatch_once(self, block_ms: int | None = None) -> int:
        """Queue what is waiting (own unacknowledged entries first); return how many were queued."""
        keys = self._ctx.keys
        queued = 0
        for cursor in ("0", ">"):
            block = block_ms if cursor == ">" else None
            for entry_id, fields in read_completions(self._redis, keys, self._consumer, cursor, 100, block):
                if fields and fields.get("kind") in ("run", "document") and fields.get("id"):
                    self._ctx.enqueue(FINISH, fields["kind"], fields["id"])
                    queued += 1
                elif fields:
                    log.warning("ignoring malformed completion entry %s: %s", entry_id, fields)
                ack_completion(self._redis, keys, entry_id)
        return queued

    def step(self) -> int:
        """One blocking round of :meth:`dispatch_once` (for a :class:`~orchestrator.background.BackgroundLoop`).

        A consumer group that vanished (the stream deleted or trimmed away) is created again.
        """
        try:
            return self.dispatch_once(block_ms=1_000)
        except redis.ResponseError as exc:
            if not str(exc).startswith("NOGROUP"):
                raise
            log.warning("the completions consumer group is gone (%s); creating it again", exc)
            self.ensure_group()
            return 0

    def close(self) -> None:
        """Close the Redis connection."""
        self._redis.close()


async def _ensure_group(redis_url: str, stream: str, group: str) -> None:
    """:func:`broker.consumer_groups.ensure_group` on a connection opened and closed for it."""
    client = open_redis(redis_url)
    try:
        await ensure_group(client, stream, group)
    finally:
        await client.aclose()
