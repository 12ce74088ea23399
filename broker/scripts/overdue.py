"""OVERDUE (``overdue.lua``): how many of a lane's undelivered entries have waited at least a given time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.scripts.lua import Arg, LuaScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis

_LUA = LuaScript("overdue.lua")


@dataclass(frozen=True, slots=True)
class Overdue:
    """A lane as one consumer group sees it: entries waiting at least the asked age (``count``, up to the
    limit asked), and how long the next entry to be delivered has waited (None: nothing waits)."""

    count: int
    oldest_age_s: float | None


class OverdueScript:
    """Counts a stream's undelivered entries that have waited long enough, in one round trip.

    A worker whose lane policy is ``bulk`` asks it of the interactive lane every fraction of a
    second: it takes interactive jobs only once they have waited past the spill delay, which means
    no interactive worker took them (none is alive, or all are full).
    """

    def layout(self, stream: str, group: str, min_age_s: float, limit: int) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that count ``stream``'s entries ``group`` has not delivered, waiting ``min_age_s`` or
        more, up to ``limit``."""
        return [stream], [group, max(0, round(min_age_s * 1000)), limit]

    async def call(self, client: aioredis.Redis, stream: str, group: str, min_age_s: float, limit: int) -> Overdue:
        """The overdue entries of ``stream`` for ``group`` (counted up to ``limit``) and the next one's wait."""
        count, age_ms = await _LUA.run(client, *self.layout(stream, group, min_age_s, limit))
        return Overdue(int(count), None if int(age_ms) < 0 else int(age_ms) / 1000)
