"""Issue 48: documents count against their key's limit of unfinished jobs exactly, on every door that takes them.

A key limited to 5 unfinished jobs queued 1,000 with one document and 10,000 with ten at once: the
document was admitted by a check at submission and its segments queued at split without a
reservation. Now the split reserves every segment first; a document that can never fit fails
saying so, and one that does not fit yet is ``held`` until it does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis.asyncio as aioredis
from rq import Queue
from rq.registry import ScheduledJobRegistry

from broker.keys import RedisKeys
from broker.queued_limit import QueuedJobLimit
from contract.settings import Settings
from orchestrator.context import TaskContext
from orchestrator.tasks import split_document
from tests.api.conftest import KeyMaker, bearer
from tests.orchestrator.test_runs_and_documents import run_orchestrator
from tests.waiting import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)
LIMIT = 5


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


@pytest.fixture
def tenant(make_key: KeyMaker) -> Iterator[tuple[str, str]]:
    """``(tenant, key)``: a tenant of this test's own whose key may have at most :data:`LIMIT` unfinished jobs."""
    name = f"docs-{uuid.uuid4().hex[:8]}"
    yield name, make_key(name, max_queued_jobs=LIMIT)


def paragraphs(count: int, word: str = "Paragraph") -> bytes:
    """A text document of ``count`` paragraphs: ``count`` segments."""
    return "".join(f"{word} number {n} of the document.\n\n" for n in range(count)).encode()


async def submit(http: httpx.AsyncClient, key: str, body: bytes) -> str:
    response = await http.post(
        "/v1/documents",
        params={"source_lang": "en", "target_lang": "fr", "format": "txt"},
        content=body,
        headers=bearer(key),
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def document(http: httpx.AsyncClient, key: str, document_id: str) -> dict[str, object]:
    response = await http.get(f"/v1/documents/{document_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    return dict(response.json())


def orchestrate() -> None:
    """`dragoman rq-worker --burst`, with RQ's scheduler before it: a held document's next try is due now."""
    ctx = TaskContext.from_environment()
    connection = ctx.rq_connection()
    scheduled = ScheduledJobRegistry(queue=Queue(ctx.keys.orchestration_queue, connection=connection))  # type: ignore[no-untyped-call]
    for job_id in scheduled.get_job_ids():
        scheduled.requeue(job_id)
    connection.close()
    run_orchestrator()


async def unfinished(settings: Settings, tenant: str) -> int:
    """The tenant's unfinished jobs and open reservations, as the limit counts them."""
    client = aioredis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        return await QueuedJobLimit(client, RedisKeys.from_settings(settings), settings.state_ttl_seconds).count(tenant)
    finally:
        await client.aclose()


async def test_a_document_waits_for_room_under_its_keys_limit_or_fails_if_it_never_fits(
    http: httpx.AsyncClient, tenant: tuple[str, str], start_worker: WorkerFactory, settings: Settings
) -> None:
    name, key = tenant
    jobs = await http.post(
        "/v1/jobs", json=[{"text": "Hi.", "source_lang": "en", "target_lang": "fr"}] * 3, headers=bearer(key)
    )
    assert jobs.status_code == 202, jobs.text
    too_large = await submit(http, key, paragraphs(12, "Large"))  # admitted: 3 jobs < 5 at submission
    waiting = await submit(http, key, paragraphs(4))
    orchestrate()
    assert await unfinished(settings, name) == 3  # today: 3 + 12 + 4 = 19 jobs queued
    failed = await document(http, key, too_large)
    assert failed["status"] == "failed", failed
    assert "12 segments, over its API key's limit of 5 unfinished jobs" in str(failed["error"])
    assert (await document(http, key, waiting))["status"] == "held"

    async def done() -> bool:
        orchestrate()
        assert await unfinished(settings, name) <= LIMIT
        return (await document(http, key, waiting))["status"] == "completed"

    async with start_worker(DeterministicEngine()):
        await until(done, "the held document queued once the key's jobs finished, and completed")
    content = await http.get(f"/v1/documents/{waiting}/content", headers=bearer(key))
    assert content.content == paragraphs(4)  # the echo engine: every segment translated, none lost


async def test_ten_documents_at_once_never_pass_the_limit_and_all_finish(
    http: httpx.AsyncClient, tenant: tuple[str, str], start_worker: WorkerFactory, settings: Settings
) -> None:
    name, key = tenant
    bodies = [paragraphs(2, f"Document{n}") for n in range(10)]
    ids = await asyncio.gather(*(submit(http, key, body) for body in bodies))  # each admitted: 0 jobs queued
    # Every split at once, as several rq-workers would: each reserves its 2 segments atomically.
    await asyncio.gather(*(asyncio.to_thread(split_document, document_id) for document_id in ids))
    assert await unfinished(settings, name) == 4  # two documents fit; today all 20 jobs were queued
    statuses = [str((await document(http, key, document_id))["status"]) for document_id in ids]
    assert sorted(statuses) == ["held"] * 8 + ["running"] * 2, statuses

    async def all_completed() -> bool:
        orchestrate()
        assert await unfinished(settings, name) <= LIMIT
        views = [await document(http, key, document_id) for document_id in ids]
        return all(view["status"] == "completed" for view in views)

    async with start_worker(DeterministicEngine()):
        await until(all_completed, "every held document queued in turn and completed")
    for document_id, body in zip(ids, bodies, strict=True):
        content = await http.get(f"/v1/documents/{document_id}/content", headers=bearer(key))
        assert content.content == body
