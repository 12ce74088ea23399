"""REFILL (``refill.lua``): staged entries of tenants moved into their lane by deficit round robin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline

LUA = LuaScript("refill.lua")


@dataclass(frozen=True, slots=True)
class Refilled:
    """What one REFILL did: entries ``moved`` into the lane, the lane's ``unread`` entries before, and the
    first ``tenants`` of the rotation it left (their staging streams go in the next call's KEYS)."""

    moved: int
    unread: int
    tenants: tuple[str, ...]


class RefillScript:
    """Refills the lanes of one deployment: its key names, consumer group, quantum and how many tenants a call names."""

    def __init__(self, keys: RedisKeys, quantum: int, tenants_per_call: int = 64, least: int = 1) -> None:
        """``least``: a refill that moves anything leaves at least this many unread entries in the lane (the
        entries a read wants are moved only when the lane holds fewer than that)."""
        if quantum <= 0 or tenants_per_call <= 0 or least <= 0:
            raise ValueError("a refill's quantum, tenants per call and least unread entries must be positive")
        self._keys = keys
        self._quantum = quantum
        self._per_call = tenants_per_call
        self._least = least

    @property
    def tenants_per_call(self) -> int:
        """How many staging streams one call names at most (and how many tenants it returns)."""
        return self._per_call

    def layout(self, lane: str, want: int, tenants: Sequence[str]) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that top ``lane`` up to ``want`` unread entries from the staging streams of ``tenants``."""
        keys = self._keys
        named = list(dict.fromkeys(tenants))[: self._per_call]
        script_keys = [lane, keys.rotation(lane), keys.deficits(lane), keys.tenant_weights]
        script_keys += [keys.staging(lane, tenant) for tenant in named]
        args: list[Arg] = [want, keys.consumer_group, self._quantum, self._per_call, self._least, *named]
        return script_keys, args

    async def call(self, client: aioredis.Redis, lane: str, want: int, tenants: Sequence[str]) -> Refilled:
        """Run one REFILL; see :meth:`layout`."""
        return parse_refilled(await LUA.run(client, *self.layout(lane, want, tenants)))

    def queue_on(self, pipe: AsyncPipeline, lane: str, want: int, tenants: Sequence[str]) -> None:
        """Queue one REFILL by EVALSHA on a non-transactional pipeline (the caller handles NOSCRIPT in its reply)."""
        keys, args = self.layout(lane, want, tenants)
        # execute_command, not pipe.evalsha: redis-py's cluster pipeline refuses the method (it routes the command
        # by its first key all the same); on a single server both queue the same EVALSHA.
        pipe.execute_command("EVALSHA", LUA.sha, len(keys), *keys, *args)


def parse_refilled(reply: Any) -> Refilled:
    """REFILL's reply as a :class:`Refilled`."""
    return Refilled(
        int(reply[0]),
        int(reply[1]),
        tuple(t.decode() if isinstance(t, bytes) else str(t) for t in reply[2:]),
    )
