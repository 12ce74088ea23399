"""AsyncClient.wait_many on a real Redis and PostgreSQL with a deterministic worker: one watch for a
request's jobs, answered in order, bounded, scoped to the tenant, and blind to no job that finished early."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

import producer.async_client as async_client_module
from contract.errors import JobNotFoundError, JobTimeoutError
from contract.schemas import JobStatus
from contract.settings import Settings
from producer.async_client import AsyncClient
from producer.client import Client
from tests.waiting import FOREVER
from tests.worker.conftest import WorkerFactory, start_worker
from worker.deterministic_engine import DeterministicEngine

__all__ = ["start_worker"]


@pytest.fixture
async def async_client(settings: Settings) -> AsyncIterator[AsyncClient]:
    """An asyncio client on the test servers."""
    async with AsyncClient(settings) as client:
        yield client


def _texts(count: int) -> list[dict[str, str]]:
    return [{"text": f"sentence {n}", "source_lang": "en", "target_lang": "fr"} for n in range(count)]


async def test_jobs_come_back_in_the_order_asked_whatever_order_they_finish_in(
    async_client: AsyncClient, start_worker: WorkerFactory
) -> None:
    ids = await async_client.submit_many(_texts(30))
    # the first jobs take longest: they finish last
    engine = DeterministicEngine(delay_for=lambda prompt: 0.3 if prompt.endswith((" 0", " 1", " 2")) else 0.0)
    async with start_worker(engine, max_in_flight=64):
        asked = [*reversed(ids[:10]), *ids[10:], ids[0]]  # any order, a repeat included
        jobs = await async_client.wait_many(asked, timeout=30)
    assert [job.id for job in jobs] == asked
    assert all(job.status is JobStatus.SUCCEEDED for job in jobs)
    by_id = dict(zip(ids, range(30), strict=True))
    assert [job.translation for job in jobs] == [f"sentence {by_id[job_id]}" for job_id in asked]


async def test_one_watch_covers_every_job_of_the_wait(async_client: AsyncClient) -> None:
    ids = await async_client.submit_many(_texts(200))
    waiting = asyncio.create_task(async_client.wait_many(ids, timeout=5))
    await asyncio.sleep(0.5)
    watchers = async_client._finishes._watchers
    assert set(watchers) == set(ids)
    assert len({watch for watches in watchers.values() for watch in watches}) == 1  # not one per job
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert watchers == {}


async def test_a_wait_past_its_timeout_says_how_many_are_unfinished_and_what_they_are(
    async_client: AsyncClient,
) -> None:
    ids = await async_client.submit_many(_texts(3))
    start = time.monotonic()
    with pytest.raises(JobTimeoutError, match=r"3 of 3 jobs are still unfinished after 0.3s \(3 queued\); is a worker"):
        await async_client.wait_many(ids, timeout=0.3)
    assert time.monotonic() - start < 2
    with pytest.raises(JobTimeoutError, match=f"job {ids[0]} is still queued after 0.2s"):
        await async_client.wait(ids[0], timeout=0.2)  # wait is wait_many of one job


async def test_another_tenants_job_or_an_unknown_one_is_not_found(async_client: AsyncClient) -> None:
    ours = await async_client.submit_many(_texts(2), tenant="tenant-a")
    theirs = await async_client.submit_many(_texts(1), tenant="tenant-b")
    with pytest.raises(JobNotFoundError, match=theirs[0]):
        await async_client.wait_many([*ours, *theirs], timeout=1, tenant="tenant-a")
    unknown = str(uuid.uuid4())
    with pytest.raises(JobNotFoundError, match=unknown):
        await async_client.wait_many([ours[0], unknown], timeout=1, tenant="tenant-a")


async def test_another_tenants_finished_job_is_not_found_either(
    async_client: AsyncClient, start_worker: WorkerFactory
) -> None:
    (theirs,) = await async_client.submit_many(_texts(1), tenant="tenant-b")
    async with start_worker(DeterministicEngine()):
        await async_client.wait_many([theirs], timeout=30, tenant="tenant-b")
    with pytest.raises(JobNotFoundError):  # answered from its row now, and still not tenant-a's
        await async_client.wait_many([theirs], timeout=1, tenant="tenant-a")


async def test_jobs_that_finished_before_the_watch_began_are_not_missed(
    settings: Settings, async_client: AsyncClient, start_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their completion events were published while nobody listened: the first read finds them,
    at once (not at the safety poll a second later), beside jobs that finish during the wait."""
    early = await async_client.submit_many(_texts(5))
    async with start_worker(DeterministicEngine(delay_for=lambda prompt: 0.5 if "late" in prompt else 0.0)):
        async with AsyncClient(settings) as other:  # a client of its own: its events were never listened to
            await other.wait_many(early, timeout=30)
        assert not async_client._finishes.listening
        # No safety poll in this wait: if the first read missed them, it would never end.
        monkeypatch.setattr(async_client_module, "_SAFETY_POLL_S", FOREVER)
        assert [job.status for job in await async_client.wait_many(early, timeout=FOREVER, poll_interval=FOREVER)] == [
            JobStatus.SUCCEEDED
        ] * 5
        late = await async_client.submit_many([{**item, "text": f"late {n}"} for n, item in enumerate(_texts(5))])
        jobs = await async_client.wait_many([*early, *late], timeout=30)
    assert [job.translation for job in jobs] == [f"sentence {n}" for n in range(5)] + [f"late {n}" for n in range(5)]


async def test_without_completion_events_the_wait_polls_and_still_finishes(
    async_client: AsyncClient, start_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_events(self: object) -> None:
        raise ConnectionError("events channel away")

    monkeypatch.setattr("broker.finish_notices.FinishNotices.connect", no_events)
    ids = await async_client.submit_many(_texts(10))
    async with start_worker(DeterministicEngine(delay_s=0.1)):
        jobs = await async_client.wait_many(ids, timeout=30)
    assert not async_client._finishes.listening
    assert [job.translation for job in jobs] == [f"sentence {n}" for n in range(10)]


async def test_an_empty_list_is_answered_at_once(async_client: AsyncClient) -> None:
    assert await async_client.wait_many([], timeout=5) == []


def test_the_synchronous_client_waits_for_many_the_same_way(client: Client) -> None:
    ids = client.submit_many(_texts(2))
    with pytest.raises(JobTimeoutError, match=r"2 of 2 jobs are still unfinished after 0.2s \(2 queued\)"):
        client.wait_many(ids, timeout=0.2)
