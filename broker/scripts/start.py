"""START (``start.lua``): mark a batch of jobs running in one call, skipping the cancelled ones.

A job with a requested cancel (its worker died before it could abort it) counts as cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from broker.keys import RedisKeys
from broker.scripts.lua import Arg, LuaScript
from contract.schemas import JobSpec, JobStatus

if TYPE_CHECKING:
    import redis.asyncio as aioredis

_LUA = LuaScript("start.lua")

MISSING = "missing"
"""The ``previous_status`` of a job that had no state record (its producer only XADDs)."""


class StartOutcome(msgspec.Struct, frozen=True):
    """What the start script found for one job (a Struct: the worker gets one per job)."""

    previous_status: str  # a JobStatus value, or MISSING
    attempts: int  # counting this one, unless the job was cancelled

    @property
    def cancelled(self) -> bool:
        """Do not run the job: it was cancelled while queued, or its cancel was requested while it ran.

        The second case is a job reclaimed from a worker that died before it could abort it. The
        record was not marked running; the worker records the job cancelled.
        """
        return self.previous_status == JobStatus.CANCELLED


class StartScript:
    """Marks jobs of one deployment running: its key names and the state records' TTL."""

    def __init__(self, keys: RedisKeys, state_ttl: int) -> None:
        self._keys = keys
        self._state_ttl = state_ttl

    def layout(self, consumer: str, now: float, specs: Sequence[JobSpec]) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV that start ``specs`` on ``consumer`` at ``now`` (unix seconds)."""
        state = self._keys.state
        args: list[Arg] = [repr(now), consumer, self._state_ttl]
        for spec in specs:
            args += (repr(spec.created_at), spec.source_lang, spec.target_lang, spec.tenant or "")
        return [state(spec.job_id) for spec in specs], args

    async def call(
        self, client: aioredis.Redis, consumer: str, now: float, specs: Sequence[JobSpec]
    ) -> list[StartOutcome]:
        """Start ``specs`` in one call; one outcome per spec, in order."""
        return _outcomes(await _LUA.run(client, *self.layout(consumer, now, specs)))


def _outcomes(flat: list[Any]) -> list[StartOutcome]:
    return [StartOutcome(str(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
