"""UNFINISHED_STANDALONE (``unfinished_standalone.lua``): a tenant's unfinished stand-alone jobs, newest first,
with the finished ones it passes removed from the set.

The script runs on one shard's two sets; :meth:`UnfinishedStandaloneScript.call` runs it on every shard
(one pipelined round trip) and merges the answers: each shard gives its newest ``count``, so the newest
``count`` of their union are among them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

_LUA = LuaScript("unfinished_standalone.lua")


class UnfinishedStandaloneScript:
    """Walks a tenant's stand-alone sets down from a score, keeping the jobs still in its unfinished-jobs sets."""

    def __init__(self, keys: RedisKeys) -> None:
        self._keys = keys

    def layout(
        self, tenant: str, max_score: float | None, count: int, *, shard: RedisKeys | None = None
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that read up to ``count`` of ``tenant``'s jobs scored at most ``max_score`` (None: any)
        on ``shard`` (None: the shard of the keys given)."""
        on = self._keys if shard is None else shard
        keys = [on.tenant_standalone(tenant), on.tenant_queued(tenant)]
        return keys, ["+inf" if max_score is None else repr(max_score), count]

    async def call(
        self, client: aioredis.Redis, tenant: str, max_score: float | None, count: int
    ) -> list[tuple[str, float]]:
        """``(job id, created_at)`` of up to ``count`` unfinished stand-alone jobs of every shard, newest first."""

        def queue(pipe: AsyncPipeline) -> None:
            for shard in self._keys.shards:
                keys, args = self.layout(tenant, max_score, count, shard=shard)
                pipe.evalsha(_LUA.sha, len(keys), *keys, *args)

        found = [
            (str(reply[i]), float(reply[i + 1]))
            for reply in await _LUA.run_pipelined(client, queue)
            for i in range(0, len(reply), 2)
        ]
        if len(self._keys.shards) > 1:
            found.sort(key=lambda job: (job[1], job[0]), reverse=True)
        return found[:count]
