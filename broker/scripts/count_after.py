"""COUNT_AFTER (``count_after.lua``): a stream's entries after an id, counted on the server up to a limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.scripts.lua import Arg, LuaScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis

_LUA = LuaScript("count_after.lua")


class CountAfterScript:
    """Counts entries after an id: a consumer group's lag where the server cannot report it (Redis before 7)."""

    def layout(self, stream: str, after_id: str, limit: int) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that count ``stream``'s entries after ``after_id``, up to ``limit``."""
        return [stream], [after_id, limit]

    async def call(self, client: aioredis.Redis, stream: str, after_id: str, limit: int) -> int:
        """How many entries of ``stream`` come after ``after_id``, counting no further than ``limit``."""
        return int(await _LUA.run(client, *self.layout(stream, after_id, limit)))
