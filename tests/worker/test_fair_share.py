"""Fair share between tenants, through a real worker: one tenant's backlog never holds another's jobs behind it.

Real Redis and PostgreSQL, the deterministic engine at zero cost; positions in the order jobs were
started (the rows' ``started_at``), never times. The scripts' own properties (atomicity, order,
turns) are in ``tests/broker/test_fair_share.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.fair_share import REFILL_BATCH
from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from producer.async_client import AsyncClient
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine

from .conftest import WorkerFactory, wait_all


def _start_order(pg: Any, ids: list[str]) -> list[str]:
    rows = pg.execute("SELECT id::text FROM jobs WHERE id = ANY(%s::uuid[]) ORDER BY started_at, id", (ids,)).fetchall()
    return [row[0] for row in rows]


def _bulk(tenant: str, count: int) -> list[TranslationRequest]:
    return [TranslationRequest(f"{tenant} line {n}", "en", "fr", lane="bulk") for n in range(count)]


async def test_a_tenants_one_job_runs_before_another_tenants_3000_job_backlog_is_done(
    settings: Settings, client: Client, pg: Any, start_worker: WorkerFactory
) -> None:
    """Issue 33: behind tenant A's 3,000-line run, tenant B's 1-line run finished only after all 3,000."""
    async with AsyncClient(settings) as producer:
        backlog = await producer.submit_many(_bulk("a", 3000), tenant="a")
        [late] = await producer.submit_many(_bulk("b", 1), tenant="b")
    async with start_worker(DeterministicEngine(), max_in_flight=16):
        jobs = await wait_all(client, [*backlog, late])
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}
    position = _start_order(pg, [*backlog, late]).index(late)
    # At most the lane's direct-submit buffer, one refill and one read of A's ahead of it (FIFO: position 3000).
    assert position <= settings.fair_share_buffer + REFILL_BATCH + 16, position


async def test_without_fair_share_the_lane_is_first_in_first_out(
    settings: Settings, client: Client, pg: Any, start_worker: WorkerFactory
) -> None:
    """``DRAGOMAN_FAIR_SHARE=false``: today's behaviour, for comparison (the bench runs both)."""
    fifo = settings.model_copy(update={"fair_share": False})
    async with AsyncClient(fifo) as producer:
        backlog = await producer.submit_many(_bulk("a", 400), tenant="a")
        [late] = await producer.submit_many(_bulk("b", 1), tenant="b")
    async with start_worker(DeterministicEngine(), max_in_flight=16, settings_=fifo):
        await wait_all(client, [*backlog, late])
    assert _start_order(pg, [*backlog, late])[-1] == late


async def test_weights_share_the_lane_three_to_one(
    settings: Settings, client: Client, pg: Any, start_worker: WorkerFactory
) -> None:
    small_buffer = settings.model_copy(update={"fair_share_buffer": 4})
    async with AsyncClient(small_buffer) as producer:
        producer.submitter.note_tenant_weight("heavy", 3)  # what the HTTP API does with each key's weight
        producer.submitter.note_tenant_weight("light", 1)
        heavy = await producer.submit_many(_bulk("heavy", 400), tenant="heavy")
        light = await producer.submit_many(_bulk("light", 400), tenant="light")
    async with start_worker(DeterministicEngine(), max_in_flight=8, settings_=small_buffer):
        await wait_all(client, heavy + light)
    order = _start_order(pg, heavy + light)
    light_ids = set(light)
    middle = ["light" if job_id in light_ids else "heavy" for job_id in order[40:440]]  # both backlogged
    counts = Counter(middle)
    assert 2.5 <= counts["heavy"] / counts["light"] <= 3.5, counts


async def test_jobs_without_a_tenant_go_into_the_lane_in_order_beside_staged_ones(
    settings: Settings, client: Client, raw_redis: Any, start_worker: WorkerFactory
) -> None:
    async with AsyncClient(settings) as producer:
        tenants = await producer.submit_many(_bulk("a", 600), tenant="a")
    plain = client.submit_many(_bulk("plain", 50))
    lane = client.keys.bulk_jobs_stream
    entries = raw_redis.xrange(lane)
    assert [fields["id"] for _, fields in entries] == tenants[: settings.fair_share_buffer] + plain
    assert raw_redis.xlen(client.keys.staging(lane, "a")) == 600 - settings.fair_share_buffer
    async with start_worker(DeterministicEngine(), max_in_flight=16):
        jobs = await wait_all(client, tenants + plain)
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}
    moved = [job_id for _, fields in raw_redis.xrange(lane) if (job_id := fields["id"]) in set(tenants)]
    # The tenant's order, kept (the housekeeper may have trimmed a prefix of what was acknowledged).
    assert moved and moved == tenants[len(tenants) - len(moved) :]
    assert not raw_redis.exists(client.keys.staging(lane, "a"))
