"""UNFINISHED_STANDALONE (``unfinished_standalone.lua``): a tenant's unfinished stand-alone jobs, newest first,
with the finished ones it passes removed from the set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis

_LUA = LuaScript("unfinished_standalone.lua")


class UnfinishedStandaloneScript:
    """Walks a tenant's stand-alone set down from a score, keeping the jobs still in its unfinished-jobs set."""

    def __init__(self, keys: RedisKeys) -> None:
        self._keys = keys

    def layout(self, tenant: str, max_score: float | None, count: int) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that read up to ``count`` of ``tenant``'s jobs scored at most ``max_score`` (None: any)."""
        keys = [self._keys.tenant_standalone(tenant), self._keys.tenant_queued(tenant)]
        return keys, ["+inf" if max_score is None else repr(max_score), count]

    async def call(
        self, client: aioredis.Redis, tenant: str, max_score: float | None, count: int
    ) -> list[tuple[str, float]]:
        """``(job id, created_at)`` of up to ``count`` unfinished stand-alone jobs, newest first."""
        reply = await _LUA.run(client, *self.layout(tenant, max_score, count))
        return [(str(reply[i]), float(reply[i + 1])) for i in range(0, len(reply), 2)]
