"""REQUEUE (``requeue.lua``): a dead letter back on its lane's jobs stream as a fresh queued job, exactly once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript
from contract.schemas import JobSpec, lane_of

if TYPE_CHECKING:
    import redis.asyncio as aioredis

_LUA = LuaScript("requeue.lua")


class RequeueScript:
    """Requeues dead letters of one deployment: its key names and the state records' TTL."""

    def __init__(self, keys: RedisKeys, state_ttl: int) -> None:
        self._keys = keys
        self._state_ttl = state_ttl

    def layout(self, dead_id: str, spec: JobSpec, fields: Mapping[str, str], now: float) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that requeue dead letter ``dead_id``: its entry ``fields``, decoded as ``spec``."""
        keys = self._keys
        script_keys = [keys.dead_letter_stream, keys.lane(lane_of(spec), spec.model), keys.state(spec.job_id)]
        args: list[Arg] = [
            dead_id,
            spec.job_id,
            fields["v"],
            fields["payload"],
            repr(now),
            spec.source_lang,
            spec.target_lang,
            self._state_ttl,
            spec.tenant or "",
        ]
        if spec.tenant:
            script_keys.append(keys.tenant_queued(spec.tenant))
        return script_keys, args

    async def call(
        self, client: aioredis.Redis, dead_id: str, spec: JobSpec, fields: Mapping[str, str], now: float
    ) -> str | None:
        """Requeue one dead letter; return its new jobs-stream entry id, or ``None`` if it was already gone."""
        reply = await _LUA.run(client, *self.layout(dead_id, spec, fields, now))
        return None if reply is None else str(reply)
