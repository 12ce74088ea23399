"""How a worker shares its free slots between the interactive and the bulk lane: its lane policy.

Interactive jobs (one at a time from an app, a user waiting) and bulk jobs (runs, documents,
batches: thousands at once) wait in streams of their own. The consumer asks its policy, before
each read, how many entries to offer each lane, which lanes may take the slots left over, and
which lanes to block on when nothing waits; the reading itself (and every guarantee about it:
never more entries than slots, entries read before an error still run) stays in the consumer.

- ``shared`` (the default): when both lanes have work, each read gives bulk ``bulk_share`` of the
  slots and interactive the rest, spread evenly over consecutive reads (smooth weighted round
  robin), so that a worker freeing one slot at a time still gives bulk its share and a flood of
  interactive jobs never starves a run. A lane with nothing waiting leaves its slots to the other,
  so either lane alone gets the whole worker.
- ``interactive``: every free slot is offered to the interactive lane first; bulk jobs are read
  only while fewer than ``interactive_bulk_in_flight`` (default 0) run here. The engine batch
  stays small and an interactive job never queues behind bulk requests inside vLLM: the engine
  ``dragoman worker --interactive-engine`` adds beside the bulk ones.
- ``bulk``: the bulk lane; interactive entries only once the next one has waited
  ``interactive_spill_seconds`` (no interactive worker took it: none is alive, or all are full),
  so an interactive job is never stranded. How long it has waited is asked of Redis (one round
  trip, :class:`broker.scripts.OverdueScript`) at most every ``SPILL_CHECK_INTERVAL_S``, and
  not before the next entry can be overdue, never per job.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from broker.keys import RedisKeys
from broker.scripts import OverdueScript
from contract.schemas import Lane
from contract.settings import Settings

if TYPE_CHECKING:
    import redis.asyncio as aioredis

SPILL_CHECK_INTERVAL_S = 0.15
"""The shortest time between two looks at the interactive lane's wait by a ``bulk``-policy worker."""

INTERACTIVE, BULK = Lane.INTERACTIVE, Lane.BULK


class LaneShares:
    """Splits each read's free slots between the lanes by weight, remembering the remainder between reads."""

    def __init__(self, bulk_share: float) -> None:
        if not 0 < bulk_share < 1:
            raise ValueError(f"bulk_share must be between 0 and 1 (exclusive), got {bulk_share}")
        self._weights = {Lane.INTERACTIVE: 1.0 - bulk_share, Lane.BULK: bulk_share}
        self._credit = dict.fromkeys(self._weights, 0.0)

    def split(self, slots: int) -> dict[Lane, int]:
        """How many of ``slots`` each lane is offered first (they add up to ``slots``)."""
        taken = dict.fromkeys(self._weights, 0)
        for _ in range(slots):
            for lane, weight in self._weights.items():
                self._credit[lane] += weight
            lane = max(self._credit, key=self._credit.__getitem__)  # ties: interactive (first)
            self._credit[lane] -= 1.0
            taken[lane] += 1
        return taken


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What one read of new entries asks for, without blocking.

    ``offers``: entries asked of each lane first (all in one round trip; they add up to at most
    the slots). ``top_up``: the lanes then offered the slots those reads left, in order (a lane
    that brought fewer than it was offered is skipped: nothing more waits there). ``limits``: the
    most entries of each lane the whole read may bring.
    """

    offers: Mapping[Lane, int]
    top_up: tuple[Lane, ...]
    limits: Mapping[Lane, int]


@dataclass(frozen=True, slots=True)
class WaitPlan:
    """The blocking read made when no lane had anything: the lanes it waits on, the ``COUNT`` it asks of
    each (``COUNT`` applies per stream, so ``len(lanes) * count`` is at most the slots), for how long."""

    lanes: tuple[Lane, ...]
    count: int
    block_ms: int


class LanePolicy(ABC):
    """What a worker reads from each lane; see the module's description of each policy."""

    name: ClassVar[str]

    @abstractmethod
    async def plan(self, slots: int, held: Mapping[Lane, int]) -> ReadPlan:
        """The non-blocking read for ``slots`` free slots, ``held`` the jobs of each lane running here."""

    @abstractmethod
    def wait(self, slots: int, held: Mapping[Lane, int]) -> WaitPlan:
        """The blocking read after :meth:`plan`'s found nothing."""

    def claim_limits(self, slots: int, held: Mapping[Lane, int]) -> dict[Lane, int]:
        """The most entries of each lane this worker may take over from dead or stale consumers now."""
        return dict.fromkeys(Lane, slots)

    @abstractmethod
    def describe(self) -> str:
        """The policy in a few words, for the worker's start line."""


class SharedLanes(LanePolicy):
    """``shared``: both lanes, bulk getting ``bulk_share`` of the slots while both have jobs waiting."""

    name = "shared"

    def __init__(self, bulk_share: float, read_block_ms: int) -> None:
        self._shares = LaneShares(bulk_share)
        self._bulk_share = bulk_share
        self._block_ms = read_block_ms

    async def plan(self, slots: int, held: Mapping[Lane, int]) -> ReadPlan:
        """Each lane its share first, then the slots one lane left to the other."""
        return ReadPlan(self._shares.split(slots), (INTERACTIVE, BULK), dict.fromkeys(Lane, slots))

    def wait(self, slots: int, held: Mapping[Lane, int]) -> WaitPlan:
        """Both lanes, half the slots each; a single slot waits on the lane its turn falls to (the other's
        entries wait for the next read, at most ``read_block_ms`` later)."""
        if slots == 1:
            (lane,) = (lane for lane, n in self._shares.split(1).items() if n)
            return WaitPlan((lane,), 1, self._block_ms)
        return WaitPlan((INTERACTIVE, BULK), slots // 2, self._block_ms)

    def describe(self) -> str:
        """For the start line."""
        return f"lanes shared, {self._bulk_share:.0%} for bulk while interactive jobs wait"


class InteractiveLanes(LanePolicy):
    """``interactive``: interactive first, bulk only while fewer than ``bulk_in_flight`` bulk jobs run here."""

    name = "interactive"

    def __init__(self, bulk_in_flight: int, read_block_ms: int) -> None:
        self._bulk_cap = bulk_in_flight
        self._block_ms = read_block_ms

    def _room(self, slots: int, held: Mapping[Lane, int]) -> int:
        return max(0, min(slots, self._bulk_cap - held.get(BULK, 0)))

    async def plan(self, slots: int, held: Mapping[Lane, int]) -> ReadPlan:
        """Every slot to interactive; what it leaves to bulk, within the bulk cap."""
        room = self._room(slots, held)
        return ReadPlan({INTERACTIVE: slots}, (BULK,) if room else (), {INTERACTIVE: slots, BULK: room})

    def wait(self, slots: int, held: Mapping[Lane, int]) -> WaitPlan:
        """The interactive lane; bulk too while its cap has room (each lane then at most that room)."""
        room = self._room(slots, held)
        if room and slots >= 2:
            return WaitPlan((INTERACTIVE, BULK), min(slots // 2, room), self._block_ms)
        return WaitPlan((INTERACTIVE,), slots, self._block_ms)

    def claim_limits(self, slots: int, held: Mapping[Lane, int]) -> dict[Lane, int]:
        """A dead worker's bulk jobs too only within the bulk cap: the bulk workers take the rest."""
        return {INTERACTIVE: slots, BULK: self._room(slots, held)}

    def describe(self) -> str:
        """For the start line."""
        return f"lane policy interactive, at most {self._bulk_cap} bulk jobs in flight"


class BulkLanes(LanePolicy):
    """``bulk``: the bulk lane, and interactive entries that have waited ``spill_s`` (nobody else took them)."""

    name = "bulk"

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: RedisKeys,
        spill_s: float,
        read_block_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._spill_s = spill_s
        self._block_ms = read_block_ms
        self._clock = clock
        self._next_check = 0.0
        self._script = OverdueScript()

    async def plan(self, slots: int, held: Mapping[Lane, int]) -> ReadPlan:
        """Overdue interactive entries first (when a look at their lane is due), bulk for the rest."""
        overdue = min(slots, await self._overdue(slots))
        return ReadPlan({INTERACTIVE: overdue, BULK: slots - overdue}, (BULK,), {INTERACTIVE: overdue, BULK: slots})

    def wait(self, slots: int, held: Mapping[Lane, int]) -> WaitPlan:
        """The bulk lane, until the next look at the interactive lane is due (at most ``read_block_ms``)."""
        due_ms = math.ceil((self._next_check - self._clock()) * 1000)
        return WaitPlan((BULK,), slots, max(1, min(self._block_ms, due_ms)))

    async def _overdue(self, slots: int) -> int:
        """How many interactive entries have waited ``spill_s`` (counted up to ``slots``); 0 between looks.

        The next look is due when the next entry can be overdue: ``spill_s`` after a look that found
        nothing waiting, ``spill_s`` less the next entry's wait otherwise (entries only get younger
        behind it), and never sooner than ``SPILL_CHECK_INTERVAL_S``.
        """
        now = self._clock()
        if now < self._next_check:
            return 0
        found = await self._script.call(
            self._redis, self._keys.jobs_stream, self._keys.consumer_group, self._spill_s, slots
        )
        if found.count or found.oldest_age_s is None:
            wait = 0.0 if found.count else self._spill_s
        else:
            wait = self._spill_s - found.oldest_age_s
        self._next_check = now + max(SPILL_CHECK_INTERVAL_S, wait)
        return found.count

    def describe(self) -> str:
        """For the start line."""
        return f"lane policy bulk, interactive jobs once they have waited {self._spill_s:g}s"


def lane_policy(settings: Settings, redis: aioredis.Redis, keys: RedisKeys) -> LanePolicy:
    """The policy ``settings.lane_policy`` names, with its settings."""
    if settings.lane_policy == "interactive":
        return InteractiveLanes(settings.interactive_bulk_in_flight, settings.read_block_ms)
    if settings.lane_policy == "bulk":
        return BulkLanes(redis, keys, settings.interactive_spill_seconds, settings.read_block_ms)
    return SharedLanes(settings.bulk_share, settings.read_block_ms)
