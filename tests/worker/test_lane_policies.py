"""Lane policies: an interactive worker keeps bulk out of its engine, a bulk worker takes interactive jobs
only once they have waited past the spill delay, and neither strands a lane.

The plans are unit tests; the reading runs real workers against real Redis Streams and PostgreSQL,
with the deterministic engine.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from typing import Any

import pytest
import redis

from broker.scripts import Overdue, OverdueScript
from contract.schemas import JobStatus, Lane, TranslationRequest
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.lanes import SPILL_CHECK_INTERVAL_S, BulkLanes, InteractiveLanes, SharedLanes, lane_policy

from .conftest import WorkerFactory, wait_all

INTERACTIVE, BULK = Lane.INTERACTIVE, Lane.BULK


class LaneCountingEngine(DeterministicEngine):
    """The deterministic engine, counting the requests of each lane it runs at once (and the most)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.running: Counter[int] = Counter()
        self.peak: Counter[int] = Counter()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Count the request in its lane while it runs."""
        self.running[request.priority] += 1
        self.peak[request.priority] = max(self.peak[request.priority], self.running[request.priority])
        try:
            return await super().generate(request)
        finally:
            self.running[request.priority] -= 1


def _start_order(pg: Any, ids: list[str]) -> list[str]:
    rows = pg.execute("SELECT id::text FROM jobs WHERE id = ANY(%s::uuid[]) ORDER BY started_at, id", (ids,)).fetchall()
    return [row[0] for row in rows]


def _waits(pg: Any, ids: list[str]) -> list[float]:
    """Seconds each job waited between its submit and its start."""
    rows = pg.execute(
        "SELECT extract(epoch FROM started_at - created_at) FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)
    ).fetchall()
    return [float(row[0]) for row in rows]


def _bulk(client: Client, count: int, word: str = "bulk") -> list[str]:
    return client.submit_many([TranslationRequest(f"{word} {i}", "en", "fr", lane="bulk") for i in range(count)])


def _interactive(client: Client, count: int, word: str = "interactive") -> list[str]:
    return client.submit_many([TranslationRequest(f"{word} {i}", "en", "fr") for i in range(count)])


# The plans --------------------------------------------------------------------------------------


async def test_the_shared_plan_is_the_weighted_split_and_waits_on_both_lanes() -> None:
    policy = SharedLanes(bulk_share=0.25, read_block_ms=500)
    plan = await policy.plan(8, {})
    assert plan.offers == {INTERACTIVE: 6, BULK: 2} and plan.top_up == (INTERACTIVE, BULK)
    wait = policy.wait(8, {})
    assert (wait.lanes, wait.count, wait.block_ms) == ((INTERACTIVE, BULK), 4, 500)
    assert len(policy.wait(1, {}).lanes) == 1  # a single slot: COUNT 1 on one lane, never two entries


async def test_the_interactive_plan_gives_bulk_only_the_room_its_cap_leaves() -> None:
    policy = InteractiveLanes(bulk_in_flight=3, read_block_ms=500)
    plan = await policy.plan(8, {BULK: 1})
    assert plan.offers == {INTERACTIVE: 8} and plan.top_up == (BULK,) and plan.limits[BULK] == 2
    assert policy.wait(8, {BULK: 1}).lanes == (INTERACTIVE, BULK) and policy.wait(8, {BULK: 1}).count == 2
    full = await policy.plan(8, {BULK: 3})
    assert full.top_up == () and full.limits[BULK] == 0
    assert policy.wait(8, {BULK: 3}).lanes == (INTERACTIVE,)
    assert policy.claim_limits(8, {BULK: 3}) == {INTERACTIVE: 8, BULK: 0}
    assert (await InteractiveLanes(0, 500).plan(4, {})).limits[BULK] == 0  # the default: never bulk


async def test_a_bulk_plan_looks_at_the_interactive_lane_only_when_an_entry_can_be_overdue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = [Overdue(0, None), Overdue(0, 0.3), Overdue(2, 0.9), Overdue(0, None)]
    asked: list[float] = []
    now = [100.0]

    async def overdue(self: OverdueScript, client: Any, stream: str, group: str, min_age: float, limit: int) -> Any:
        asked.append(now[0])
        return answers.pop(0)

    monkeypatch.setattr(OverdueScript, "call", overdue)
    policy = BulkLanes(None, _keys(), spill_s=0.5, read_block_ms=500, clock=lambda: now[0])  # type: ignore[arg-type]
    assert (await policy.plan(4, {})).offers == {INTERACTIVE: 0, BULK: 4}  # nothing waits: next look in 0.5 s
    assert policy.wait(4, {}).lanes == (BULK,) and policy.wait(4, {}).block_ms == 500
    now[0] += 0.4
    await policy.plan(4, {})  # not due: no round trip
    assert policy.wait(4, {}).block_ms == 100  # the blocking read ends when the next look is due
    now[0] += 0.1
    await policy.plan(4, {})  # the next entry has waited 0.3 s: it can be overdue in 0.2 s
    now[0] += 0.2
    plan = await policy.plan(1, {})
    assert plan.offers == {INTERACTIVE: 1, BULK: 0} and plan.limits[INTERACTIVE] == 1  # never more than the slots
    now[0] += SPILL_CHECK_INTERVAL_S / 2
    await policy.plan(4, {})  # more may be overdue, but not looked at again this soon
    now[0] += SPILL_CHECK_INTERVAL_S
    await policy.plan(4, {})
    assert [round(t - 100.0, 3) for t in asked] == [0.0, 0.5, 0.7, round(0.7 + 1.5 * SPILL_CHECK_INTERVAL_S, 3)]


def _keys() -> Any:
    from broker.keys import RedisKeys

    return RedisKeys.from_settings(Settings(key_prefix="plan-test"))


def test_the_settings_name_the_policy() -> None:
    keys = _keys()
    assert isinstance(lane_policy(Settings(), None, keys), SharedLanes)  # type: ignore[arg-type]
    assert isinstance(lane_policy(Settings(lane_policy="interactive"), None, keys), InteractiveLanes)  # type: ignore[arg-type]
    assert isinstance(lane_policy(Settings(lane_policy="bulk"), None, keys), BulkLanes)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lane_policy"):
        Settings(lane_policy="urgent")  # type: ignore[arg-type]


# Interactive policy ------------------------------------------------------------------------------


async def test_an_interactive_worker_reads_interactive_jobs_first_and_never_holds_more_bulk_than_its_cap(
    client: Client, pg: Any, start_worker: WorkerFactory, settings: Settings
) -> None:
    bulk = _bulk(client, 40)  # queued first
    interactive = _interactive(client, 10)
    engine = LaneCountingEngine(delay_s=0.02)
    policy = settings.model_copy(update={"lane_policy": "interactive", "interactive_bulk_in_flight": 1})
    async with start_worker(engine, max_in_flight=4, settings_=policy):
        jobs = await wait_all(client, bulk + interactive)
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}  # bulk too: within its cap of 1
    assert set(_start_order(pg, bulk + interactive)[:10]) == set(interactive)  # shared would slip bulk in
    assert engine.peak[BULK.engine_priority] == 1
    assert engine.peak[INTERACTIVE.engine_priority] == 4


async def test_an_interactive_worker_with_no_bulk_cap_leaves_bulk_jobs_to_others(
    client: Client, raw_redis: redis.Redis, start_worker: WorkerFactory, settings: Settings
) -> None:
    bulk = _bulk(client, 5)
    interactive = _interactive(client, 5)
    policy = settings.model_copy(update={"lane_policy": "interactive", "reclaim_interval_seconds": 0.1})
    async with start_worker(DeterministicEngine(), max_in_flight=4, settings_=policy) as worker:
        await wait_all(client, interactive)
        await asyncio.sleep(0.5)  # many reads and reclaim rounds later
        assert {client.get(job_id).status for job_id in bulk} == {JobStatus.QUEUED}
        beat = raw_redis.hgetall(worker.keys.worker(worker.consumer.consumer_name))
    assert beat["lane_policy"] == "interactive"  # dragoman stats shows it


# Bulk policy --------------------------------------------------------------------------------------


async def test_a_bulk_worker_leaves_a_fresh_interactive_job_and_takes_it_once_it_waited_past_the_spill_delay(
    client: Client, pg: Any, start_worker: WorkerFactory, settings: Settings
) -> None:
    spill = 1.0
    policy = settings.model_copy(
        update={"lane_policy": "bulk", "interactive_spill_seconds": spill, "read_block_ms": 500}
    )
    async with start_worker(DeterministicEngine(), settings_=policy):
        await asyncio.sleep(0.3)  # reading: the bulk lane is empty, the worker blocks on it
        (job_id,) = _interactive(client, 1)
        await asyncio.sleep(spill / 2)
        assert client.get(job_id).status is JobStatus.QUEUED  # fresh: left for an interactive worker
        (job,) = await wait_all(client, [job_id])
    assert job.status is JobStatus.SUCCEEDED
    (waited,) = _waits(pg, [job_id])
    # Taken once overdue, and soon after: the blocking read on the empty bulk lane ends for the next look.
    assert spill <= waited < spill + 2 * SPILL_CHECK_INTERVAL_S + 0.3


async def test_a_bulk_worker_alone_still_runs_interactive_jobs_beside_a_bulk_backlog(
    client: Client, pg: Any, start_worker: WorkerFactory, settings: Settings
) -> None:
    """No interactive worker alive: interactive jobs are taken after the spill delay, not behind the backlog."""
    bulk = _bulk(client, 300)
    policy = settings.model_copy(update={"lane_policy": "bulk", "interactive_spill_seconds": 0.2})
    async with start_worker(DeterministicEngine(delay_s=0.02), max_in_flight=4, settings_=policy):
        await asyncio.sleep(0.3)
        interactive = _interactive(client, 3)
        jobs = await wait_all(client, bulk + interactive)
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}
    order = _start_order(pg, bulk + interactive)
    assert max(order.index(job_id) for job_id in interactive) < len(order) // 2  # long before the backlog's end
    assert all(0.2 <= waited < 2.0 for waited in _waits(pg, interactive))


async def test_a_bulk_worker_looks_at_the_interactive_lane_a_few_times_a_second_not_per_job(
    client: Client, start_worker: WorkerFactory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks: list[float] = []
    original = OverdueScript.call

    async def counted(self: OverdueScript, *args: Any) -> Overdue:
        looks.append(time.monotonic())
        return await original(self, *args)

    monkeypatch.setattr(OverdueScript, "call", counted)
    policy = settings.model_copy(update={"lane_policy": "bulk", "interactive_spill_seconds": 0.0})
    bulk = _bulk(client, 400)
    started = time.monotonic()
    async with start_worker(DeterministicEngine(), max_in_flight=2, settings_=policy):
        await wait_all(client, bulk)
        elapsed = time.monotonic() - started
    assert looks and len(looks) <= elapsed / SPILL_CHECK_INTERVAL_S + 2  # 400 jobs, 200+ reads
    assert min(b - a for a, b in itertools.pairwise(looks)) >= SPILL_CHECK_INTERVAL_S * 0.9


async def test_interactive_jobs_go_to_the_interactive_worker_while_a_bulk_worker_drains_a_backlog(
    client: Client, start_worker: WorkerFactory, settings: Settings
) -> None:
    """The group's layout in one process: a bulk worker and an interactive one on the same queue."""
    bulk = _bulk(client, 200)
    bulk_settings = settings.model_copy(update={"lane_policy": "bulk", "interactive_spill_seconds": 2.0})
    interactive_settings = settings.model_copy(update={"lane_policy": "interactive"})
    bulk_engine = DeterministicEngine(delay_s=0.01, tag=" [B]")
    async with (
        start_worker(bulk_engine, max_in_flight=4, settings_=bulk_settings),
        start_worker(DeterministicEngine(tag=" [I]"), max_in_flight=2, settings_=interactive_settings),
    ):
        interactive = []
        for i in range(5):
            interactive += _interactive(client, 1, word=f"now {i}")
            await asyncio.sleep(0.05)
        jobs = await wait_all(client, interactive)
        assert not all(client.get(job_id).status.is_final for job_id in bulk)  # the backlog still drains
        await wait_all(client, bulk)
    assert {job.translation for job in jobs} == {f"now {i} 0 [I]" for i in range(5)}
    assert bulk_engine.requests == 200  # not one interactive job went to the bulk worker
