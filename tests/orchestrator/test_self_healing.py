"""Runs and documents finish or fail, never hang: each test reproduces a way one stayed unfinished for good.

The group's hash expired before its last job (no completion entry: the run stayed ``finishing``);
a finish that failed six times landed in RQ's failed registry; a dispatcher thread that died on
an unexpected Redis error left the process up and every later run stuck; a split that raised
anything but dragoman's own errors left its document ``splitting``; a split task lost with a
killed orchestrator did the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from rq import Queue
from rq.job import Job as RqJob
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from contract.errors import DocumentTooLargeError
from contract.orchestration import FINISH, OrchestratorTask
from contract.settings import Settings
from orchestrator import tasks
from orchestrator.background import BackgroundLoop
from orchestrator.context import TaskContext
from orchestrator.dispatcher import CompletionDispatcher
from orchestrator.sweeper import GroupSweeper
from producer.client import Client
from tests.orchestrator.test_runs_and_documents import BurstWorker, orchestrate_until, run_orchestrator, write_jsonl
from tests.waiting import FOREVER, until, wait_for
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment."""


def _run(client: Client, tmp_path: Path, lines: int = 5) -> str:
    path = write_jsonl(tmp_path / "r.jsonl", [{"custom_id": str(i), "text": f"t {i}"} for i in range(lines)])
    return client.submit_run(path, source_lang="en", target_lang="fr")


async def test_a_run_whose_group_hash_expired_is_finished_by_the_sweeper(
    client: Client, tmp_path: Path, raw_redis: redis.Redis, start_worker: WorkerFactory
) -> None:
    run_id = _run(client, tmp_path)
    raw_redis.delete(client.keys.group(run_id))  # what its TTL does to a run queued longer than it
    async with start_worker(DeterministicEngine()):
        await until(lambda: client.get_run(run_id).status == "finishing", "every line done, the run finishing")
    dispatcher = CompletionDispatcher(TaskContext.from_environment())
    dispatcher.ensure_group()
    assert dispatcher.dispatch_once() == 0  # no completion entry was written
    dispatcher.close()
    assert GroupSweeper(TaskContext.from_environment()).sweep_once().finishes == 1
    _work_queue()
    assert client.get_run(run_id).status == "completed"
    assert GroupSweeper(TaskContext.from_environment()).sweep_once().finishes == 0


async def test_a_finishing_group_leaves_no_bookkeeping_in_redis(
    client: Client, tmp_path: Path, raw_redis: redis.Redis, start_worker: WorkerFactory
) -> None:
    run_id = _run(client, tmp_path)
    assert raw_redis.ttl(client.keys.group(run_id)) > 0
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(lambda: client.get_run(run_id).status == "completed", "the run completed")
    assert not raw_redis.exists(client.keys.group(run_id), client.keys.group_done(run_id))


def test_a_finish_is_retried_past_any_cap_until_postgres_is_back(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg: Any
) -> None:
    run_id = _run(client, tmp_path, lines=1)
    pg.execute(  # every job has a row: the run is ready to finish
        "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, run_id, sequence, "
        "created_day) VALUES (gen_random_uuid(), 'succeeded', 'en', 'fr', 't', now(), %s, 0, "
        "(now() AT TIME ZONE 'UTC')::date)",
        (run_id,),
    )
    ctx = TaskContext.from_environment()
    real_store = TaskContext.group_store
    outage = {"left": 12}  # more failures than the old Retry(max=5) allowed

    def group_store(self: TaskContext) -> Any:
        if outage["left"]:
            outage["left"] -= 1
            raise psycopg.OperationalError("connection refused: PostgreSQL is away")
        return real_store(self)

    monkeypatch.setattr(TaskContext, "group_store", group_store)
    ctx.enqueue(FINISH, "run", run_id)
    connection = ctx.rq_connection()
    queue = Queue(ctx.keys.orchestration_queue, connection=connection)
    scheduled = ScheduledJobRegistry(queue=queue)  # type: ignore[no-untyped-call]
    for _ in range(13):
        BurstWorker([queue], connection=connection).work(burst=True)
        for job_id in scheduled.get_job_ids():  # what the scheduler does once the retry's wait is over
            scheduled.requeue(job_id)
    assert FailedJobRegistry(queue=queue).count == 0
    assert (RqJob.fetch(f"finish-run-{run_id}", connection=connection).retries_left or 0) > 1_000
    assert client.get_run(run_id).status == "completed"
    connection.close()


def test_the_dispatcher_loop_survives_errors_and_gives_up_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = TaskContext.from_environment()
    dispatcher = CompletionDispatcher(ctx)
    dispatcher.ensure_group()
    conn = redis.Redis.from_url(ctx.redis_url, decode_responses=True)
    conn.xadd(ctx.keys.completions_stream, {"kind": "run", "id": "4b1d5c9e-8f7a-4e3b-9c2d-1a0b9c8d7e6f"})
    queued: list[str] = []
    failures = {"left": 2}

    def enqueue(_ctx: TaskContext, task: OrchestratorTask, kind: str, group_id: str) -> None:
        assert task is FINISH
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("an unexpected bug")
        queued.append(group_id)

    monkeypatch.setattr(TaskContext, "enqueue", enqueue)
    fatal: list[BaseException] = []
    loop = BackgroundLoop("test-dispatcher", dispatcher.step, interval=0, on_fatal=fatal.append, max_failures=3)
    loop.start()
    wait_for(lambda: queued, "the entry dispatched, past two errors")
    assert queued == ["4b1d5c9e-8f7a-4e3b-9c2d-1a0b9c8d7e6f"] and loop.alive  # two errors survived, entry kept
    conn.delete(ctx.keys.completions_stream)  # the group vanished with its stream: created again
    conn.xadd(ctx.keys.completions_stream, {"kind": "run", "id": "5c2e6d0f-9a8b-4f4c-8d3e-2b1c0d9e8f7a"})
    wait_for(lambda: len(queued) == 2, "the entry of the group created again dispatched")
    conn.delete(ctx.keys.completions_stream)
    conn.set(ctx.keys.completions_stream, "not a stream")  # an error no retry mends
    wait_for(lambda: fatal, "the loop given up")
    assert not loop.alive and "WRONGTYPE" in str(fatal[0])
    loop.stop()
    dispatcher.close()
    conn.close()


def test_the_rq_worker_exits_non_zero_when_its_dispatcher_cannot_go_on(settings: Settings, tmp_path: Path) -> None:
    assert settings.redis_url and settings.database_url
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "rq-worker", "--queue", "orchestration"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "stderr.log").open("w"),
    )
    try:
        conn = redis.Redis.from_url(settings.redis_url)
        keys = TaskContext.from_environment().keys
        # RQ's worker waiting for work: its SIGTERM handler is in place (the dispatcher giving up sends SIGTERM)
        wait_for(lambda: _idle_rq_worker_on(settings.redis_url or "", keys.orchestration_queue), "RQ's worker idle")
        wait_for(lambda: _dispatcher_read(conn, keys.completions_stream), "the dispatcher reading its stream")
        conn.delete(keys.completions_stream)
        conn.set(keys.completions_stream, "not a stream")
        assert process.wait(timeout=FOREVER) == 1  # the old process stayed up with a dead dispatcher thread
        assert "dragoman-dispatcher cannot go on" in (tmp_path / "stderr.log").read_text()
        conn.close()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()


def test_a_split_that_raises_anything_fails_the_document_with_the_reason(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a splitter bug")

    monkeypatch.setattr(tasks, "split_source", broken)
    document_id = client.submit_document("Some text.\n", "txt", "en", "fr")
    run_orchestrator()
    progress = client.get_document(document_id)
    assert progress.status == "failed"
    assert progress.error == "could not be split: KeyError: 'a splitter bug'"


def test_a_document_over_the_segment_cap_fails_with_the_setting_named(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAGOMAN_MAX_DOCUMENT_SEGMENTS", "10")
    document_id = client.submit_document("A line.\n" * 11, "txt", "en", "fr")
    run_orchestrator()
    progress = client.get_document(document_id)
    assert progress.status == "failed" and "DRAGOMAN_MAX_DOCUMENT_SEGMENTS" in (progress.error or "")


def test_a_document_over_the_size_cap_is_refused_at_submit(client: Client) -> None:
    client.settings.max_document_chars = 100
    with pytest.raises(DocumentTooLargeError, match="DRAGOMAN_MAX_DOCUMENT_CHARS"):
        client.submit_document("word " * 30, "txt", "en", "fr")


def test_a_lost_split_task_is_queued_again_by_the_sweeper(client: Client, pg: Any) -> None:
    document_id = client.submit_document("Some text.\n", "txt", "en", "fr")
    ctx = TaskContext.from_environment()
    connection = ctx.rq_connection()
    # The task died with its orchestrator.
    Queue(ctx.keys.orchestration_queue, connection=connection).empty()  # type: ignore[no-untyped-call]
    connection.close()
    pg.execute("UPDATE documents SET created_at = now() - interval '1 hour' WHERE id = %s", (document_id,))
    assert GroupSweeper(ctx).sweep_once().splits == 1
    _work_queue()
    assert client.get_document(document_id).status == "running"


def _work_queue() -> None:
    ctx = TaskContext.from_environment()
    connection = ctx.rq_connection()
    BurstWorker([Queue(ctx.keys.orchestration_queue, connection=connection)], connection=connection).work(burst=True)
    connection.close()


def _idle_rq_worker_on(redis_url: str, queue: str) -> bool:
    """Whether an RQ worker of ``queue`` waits for work (past its start-up: its signal handlers are installed)."""
    from rq import Worker

    connection = redis.Redis.from_url(redis_url)
    try:
        return any(queue in w.queue_names() and w.get_state() == "idle" for w in Worker.all(connection=connection))
    finally:
        connection.close()


def _dispatcher_read(conn: redis.Redis, stream: str) -> bool:
    """Whether a consumer of the completions stream's group has read it (the dispatcher is in its loop)."""
    return conn.exists(stream) == 1 and any(group["consumers"] for group in conn.xinfo_groups(stream))


def test_a_split_failing_inside_postgresql_still_fails_the_document(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error PostgreSQL raises aborts the transaction; the savepoint keeps it usable for the failure."""
    from storage import GroupStore

    async def refused(self: GroupStore, *args: Any) -> None:
        await self._execute("SELECT 1 / 0", ())

    monkeypatch.setattr(GroupStore, "save_skeleton", refused)
    document_id = client.submit_document("Some text.\n", "txt", "en", "fr")
    run_orchestrator()
    progress = client.get_document(document_id)
    assert progress.status == "failed" and "DivisionByZero" in (progress.error or "")


def test_a_background_loop_waits_out_an_outage_of_any_length() -> None:
    """Outages never count against the loop: ten in a row, with three errors allowed, and it goes on."""
    from contract.backoff import Backoff

    calls = {"n": 0}

    def step() -> None:
        calls["n"] += 1
        if calls["n"] <= 10:
            raise (redis.ConnectionError if calls["n"] % 2 else psycopg.OperationalError)("away")

    fatal: list[BaseException] = []
    loop = BackgroundLoop(
        "test-loop", step, interval=0.001, on_fatal=fatal.append, max_failures=3, backoff=Backoff(0.001, 0.01)
    )
    loop.start()
    wait_for(lambda: calls["n"] > 12, "the loop past ten outages")
    loop.stop()
    assert not fatal and not loop.alive
