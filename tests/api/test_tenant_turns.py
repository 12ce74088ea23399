"""Issue 48: documents and webhooks take turns by tenant, as jobs do.

A 2-paragraph document waited 32-52 s behind another tenant's 6 large ones (first-in first-out
orchestration), and 12 callbacks to a receiver that never answers delayed another tenant's webhook
to 117.7 s (one delivery at a time, first-in first-out). Now each tenant has at most one task on
the orchestration queue at a time (its others wait their turn), and the webhook deliveries run
several at once with at most one per tenant.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI
from rq import Queue
from rq.job import Job as RqJob

from api import create_app
from broker.keys import RedisKeys
from broker.queued_limit import QueuedJobLimit
from contract.settings import Settings
from orchestrator.context import TaskContext
from orchestrator.dispatcher import CompletionDispatcher
from tests.api.conftest import KeyMaker, bearer, with_unlimited_wait
from tests.orchestrator.test_runs_and_documents import BurstWorker
from tests.orchestrator.test_webhooks import Receiver
from tests.waiting import FOREVER, until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)
SECRET = "s3cret"


@pytest.fixture(autouse=True)
def _env(settings_env: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The RQ tasks (here and in the rq-worker process) read their settings from the environment."""
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS", '["127.0.0.0/8"]')
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_TIMEOUT_SECONDS", str(FOREVER))  # the held receiver is not cut here


@pytest.fixture
async def hooks_http(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The API with a webhook secret (callback URLs need one), in-process."""
    app: FastAPI = create_app(with_unlimited_wait(settings).model_copy(update={"webhook_secret": SECRET}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
            yield client


def tenant(make_key: KeyMaker, name: str) -> tuple[str, str]:
    """``(tenant, key)`` of a tenant of this test's own."""
    unique = f"{name}-{uuid.uuid4().hex[:8]}"
    return unique, make_key(unique)


async def unfinished(settings: Settings, *tenants: str) -> int:
    """The tenants' unfinished jobs, as their limit counts them."""
    client = aioredis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        limit = QueuedJobLimit(client, RedisKeys.from_settings(settings), settings.state_ttl_seconds)
        return sum([await limit.count(name) for name in tenants])
    finally:
        await client.aclose()


def orchestrate_one_task() -> None:
    """One step of `dragoman rq-worker`: queue the finishes of what completed, then run the next task, one only."""
    ctx = TaskContext.from_environment()
    dispatcher = CompletionDispatcher(ctx)
    dispatcher.ensure_group()
    dispatcher.dispatch_once()
    dispatcher.close()
    connection = ctx.rq_connection()
    BurstWorker([Queue(ctx.keys.orchestration_queue, connection=connection)], connection=connection).work(
        burst=True, max_jobs=1
    )
    connection.close()


async def test_a_small_document_finishes_while_another_tenants_large_ones_are_still_being_split(
    http: httpx.AsyncClient, make_key: KeyMaker, start_worker: WorkerFactory, settings: Settings
) -> None:
    (big, big_key), (small, small_key) = tenant(make_key, "big"), tenant(make_key, "small")
    params = {"source_lang": "en", "target_lang": "fr", "format": "txt"}
    large = "".join(f"Paragraph {n} of a long report, one sentence each.\n\n" for n in range(60)).encode()
    large_ids = []
    for _ in range(6):  # queued first: first-in first-out, all six were split before anything else
        response = await http.post("/v1/documents", params=params, content=large, headers=bearer(big_key))
        assert response.status_code == 202, response.text
        large_ids.append(response.json()["id"])
    response = await http.post(
        "/v1/documents", params=params, content=b"A short note.\n\nTwo paragraphs.\n", headers=bearer(small_key)
    )
    small_id = response.json()["id"]

    async def status(key: str, document_id: str) -> str:
        return str((await http.get(f"/v1/documents/{document_id}", headers=bearer(key))).json()["status"])

    async with start_worker(DeterministicEngine(), max_in_flight=64):
        # One task at a time, each followed by the translation of what it queued: only the queue's order decides.
        while await status(small_key, small_id) != "completed":
            orchestrate_one_task()  # on this thread: RQ's worker needs the main thread
            await until(lambda: _none(settings, big, small), "every job queued so far finished")
        statuses = [await status(big_key, document_id) for document_id in large_ids]
    assert "splitting" in statuses, statuses  # today: all six were split before the small one was


async def _none(settings: Settings, *tenants: str) -> bool:
    """Whether every job the tenants queued so far has finished."""
    return await unfinished(settings, *tenants) == 0


def _rq_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cli.main", "rq-worker"], env={**os.environ, **env})


async def test_a_receiver_that_never_answers_holds_only_its_own_tenants_webhooks(
    hooks_http: httpx.AsyncClient, make_key: KeyMaker, start_worker: WorkerFactory, settings: Settings, pg: Any
) -> None:
    (_, stuck_key), (_, other_key) = tenant(make_key, "stuck"), tenant(make_key, "other")
    stuck, fine = Receiver(held=True), Receiver()
    # Two deliveries at once: without a per-tenant bound the stuck tenant's webhooks would hold both.
    process = _rq_worker({"DRAGOMAN_WEBHOOK_WORKERS": "2", "DRAGOMAN_WEBHOOK_TENANT_CONCURRENCY": "1"})
    line = json.dumps({"custom_id": "x", "text": "hello"}).encode() + b"\n"

    async def run(key: str, callback: str) -> str:
        params = {"source_lang": "en", "target_lang": "fr", "callback_url": callback}
        response = await hooks_http.post("/v1/runs", params=params, content=line, headers=bearer(key))
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    def queued_webhooks(run_ids: list[str]) -> bool:
        connection = TaskContext.from_environment().rq_connection()
        try:
            return all(RqJob.exists(f"webhook-run-{run_id}", connection=connection) for run_id in run_ids)
        finally:
            connection.close()

    try:
        async with start_worker(DeterministicEngine()):
            stuck_runs = [await run(stuck_key, stuck.url()) for _ in range(3)]
            await until(stuck.handler.arrived.is_set, "the first webhook held by the receiver that never answers")
            await until(lambda: queued_webhooks(stuck_runs), "all three of its webhooks queued")
            other_run = await run(other_key, fine.url())
            await until(lambda: fine.received, "the other tenant's webhook delivered meanwhile")
            assert len(stuck.received) == 1  # the stuck tenant has one delivery in flight, its others wait
            assert process.poll() is None
        stuck.hold.set()

        def delivered(run_id: str) -> bool:
            row = pg.execute("SELECT webhook_status FROM runs WHERE id = %s", (run_id,)).fetchone()
            return bool(row and row[0] == "delivered")

        await until(lambda: all(delivered(run_id) for run_id in [*stuck_runs, other_run]), "every webhook delivered")
        assert len(stuck.received) == 3  # held ones delivered once released: none lost
    finally:
        stuck.close()
        fine.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=FOREVER) == 0
