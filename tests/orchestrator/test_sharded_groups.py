"""Runs whose jobs span shards (``DRAGOMAN_REDIS_SHARDS=3`` on the one embedded server: three hash tags).

The group's record has one part per shard; the worker's FINISH script (run here per shard, as a worker
finishing a batch read from that shard does) completes each part on its own shard; the dispatcher reads
every shard's completions stream and queues the finish once every part is complete. Each test checks
the run finishes exactly once (one webhook), whatever the order the parts complete in.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest
import redis

from broker.group_records import part_totals
from broker.orchestration import orchestration_redis_url
from broker.redis_client import is_cluster
from broker.scripts.finish import FinishedJob, FinishScript
from contract.errors import ConfigurationError
from contract.ids import job_id_for, shard_of
from contract.schemas import JobStatus
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.wire import JobEvent
from orchestrator.context import TaskContext
from orchestrator.sweeper import GroupSweeper
from producer.client import Client
from storage.jobs import JobRowWriter, RowRecord
from tests.orchestrator.test_runs_and_documents import run_orchestrator

pytestmark = pytest.mark.timeout(300)
SHARDS = 3


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[bytes]]

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, type[_Hook]]]:
    """A webhook receiver on loopback that counts deliveries."""
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS", '["127.0.0.0/8"]')
    handler = type("Hook", (_Hook,), {"received": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()


@pytest.fixture
def sharded(settings_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The test's settings with three shards, in the environment too (the RQ tasks read theirs)."""
    settings_env.redis_shards = SHARDS
    settings_env.webhook_secret = "test-secret"
    monkeypatch.setenv("DRAGOMAN_REDIS_SHARDS", str(SHARDS))
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_SECRET", "test-secret")
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_RETRY_SECONDS", "[0, 0, 0]")
    return settings_env


@pytest.fixture
def sharded_client(sharded: Settings) -> Iterator[Client]:
    """A producer client of the three-shard deployment."""
    with Client(sharded) as client:
        yield client


def _run_spanning(client: Client, jobs: int, callback_url: str | None, want_empty_part: bool = False) -> str:
    """Create a run of ``jobs`` jobs (rows ``submitting``, its record on every shard); with
    ``want_empty_part`` one whose jobs leave some shard empty, else one with jobs on every shard."""
    while True:
        run_id = str(uuid.uuid4())
        totals = part_totals(run_id, jobs, SHARDS)
        if (0 in totals) == want_empty_part:
            break
    client.run(client.core.groups.create_run(run_id, "en", "fr", jobs, "sharded", callback_url))
    return run_id


def _finish_part(client: Client, run_id: str, jobs: int, shard: int) -> None:
    """What a worker does for the run's jobs on ``shard``: write their rows, then FINISH with that shard's keys."""
    keys = client.keys.for_shard(shard)
    ids = [(n, job_id_for(run_id, n)) for n in range(jobs) if shard_of(job_id_for(run_id, n), SHARDS) == shard]
    now = time.time()
    rows = [
        RowRecord(
            id=job_id,
            status="succeeded",
            source_lang="en",
            target_lang="fr",
            source_text=f"t {n}",
            translated_text=f"T {n}",
            error=None,
            attempts=1,
            model=None,
            prompt_tokens=None,
            output_tokens=None,
            created_at=now,
            started_at=now,
            finished_at=now,
            metadata={},
            run_id=run_id,
            document_id=None,
            sequence=n,
        )
        for n, job_id in ids
    ]
    finished = [FinishedJob(JobEvent(job_id, JobStatus.SUCCEEDED, now), group_id=run_id) for _, job_id in ids]

    async def finish() -> None:
        writer = JobRowWriter(client.core.database_url)
        try:
            await writer.write_rows(rows)
        finally:
            await writer.close()
        settings = client.settings
        script = FinishScript(keys, settings.finished_state_ttl_seconds, settings.events_maxlen)
        await script.call(client.core.redis, [], finished, now)

    client.run(finish())


def _records_left(client: Client, run_id: str) -> int:
    """How many of the run's record and done-set keys are left, over every shard (on a cluster too)."""
    return sum(
        int(client.run(client.core.redis.exists(s.group(run_id), s.group_done(run_id)))) for s in client.keys.shards
    )


def _finishes_once_when_the_last_part_completes(client: Client, handler: type[_Hook], url: str) -> str:
    """Three parts completed one at a time: the run waits for the last one, then finishes once."""
    redis_ = client.core.redis
    keys = client.keys
    run_id = _run_spanning(client, 30, url)
    totals = part_totals(run_id, 30, SHARDS)
    for shard in keys.shards:  # the record is on every shard, each part with its own total
        part = {"kind": "run", "id": run_id, "total": str(totals[shard.shard])}
        assert client.run(redis_.hgetall(shard.group(run_id))) == part
    for shard in (2, 0):  # two parts complete: their entries are read, the run waits for the third
        _finish_part(client, run_id, 30, shard)
        assert run_orchestrator() == 0
        assert client.get_run(run_id).status == "submitting"
        assert client.run(redis_.xlen(keys.for_shard(shard).completions_stream)) == 1
    _finish_part(client, run_id, 30, 1)
    assert run_orchestrator() == 1  # the last part's entry finds every part complete
    assert client.get_run(run_id).status == "completed"
    for _ in range(3):
        run_orchestrator()
    assert len(handler.received) == 1
    assert _records_left(client, run_id) == 0
    return run_id


def test_parts_hold_the_number_of_the_groups_jobs_on_each_shard() -> None:
    group = str(uuid.uuid4())
    totals = part_totals(group, 50, SHARDS)
    assert totals == [sum(1 for n in range(50) if shard_of(job_id_for(group, n), SHARDS) == s) for s in range(SHARDS)]
    assert sum(totals) == 50 and all(totals)  # 50 jobs over 3 shards: every shard has some
    skipped = {0, 7, 49}
    without = part_totals(group, 50, SHARDS, skipped)
    for n in skipped:
        totals[shard_of(job_id_for(group, n), SHARDS)] -= 1
    assert without == totals
    assert part_totals(group, 50, 1, skipped) == [47]  # one shard: no id is hashed


def test_a_run_spanning_three_shards_finishes_once_when_its_last_part_completes(
    sharded_client: Client, hook: tuple[str, type[_Hook]]
) -> None:
    url, handler = hook
    _finishes_once_when_the_last_part_completes(sharded_client, handler, url)


def test_parts_completed_before_the_dispatcher_looks_finish_the_run_once(
    sharded_client: Client, raw_redis: redis.Redis, hook: tuple[str, type[_Hook]]
) -> None:
    url, handler = hook
    client = sharded_client
    run_id = _run_spanning(client, 30, url)
    for shard in range(SHARDS):
        _finish_part(client, run_id, 30, shard)
    assert run_orchestrator() == SHARDS  # every entry sees the run complete: queued three times
    for _ in range(3):
        run_orchestrator()
    assert client.get_run(run_id).status == "completed"
    assert len(handler.received) == 1  # finishing again found the row final: one webhook
    assert _records_left(client, run_id) == 0


def test_a_part_of_total_zero_counts_as_complete(
    sharded_client: Client, raw_redis: redis.Redis, hook: tuple[str, type[_Hook]]
) -> None:
    url, handler = hook
    client, keys = sharded_client, sharded_client.keys
    run_id = _run_spanning(client, 2, url, want_empty_part=True)
    totals = part_totals(run_id, 2, SHARDS)
    empty = totals.index(0)
    assert raw_redis.hget(keys.for_shard(empty).group(run_id), "total") == "0"
    for shard, total in enumerate(totals):
        if total:
            _finish_part(client, run_id, 2, shard)
    assert raw_redis.xlen(keys.for_shard(empty).completions_stream) == 0  # the empty part never completes itself
    run_orchestrator()
    run_orchestrator()
    assert client.get_run(run_id).status == "completed"
    assert len(handler.received) == 1
    assert _records_left(client, run_id) == 0


def test_a_part_whose_record_expired_does_not_hold_the_run_back(sharded_client: Client, raw_redis: redis.Redis) -> None:
    client, keys = sharded_client, sharded_client.keys
    run_id = _run_spanning(client, 30, None)
    raw_redis.delete(keys.for_shard(1).group(run_id))  # its TTL ran out while its jobs were queued
    for shard in range(SHARDS):
        _finish_part(client, run_id, 30, shard)
    assert raw_redis.xlen(keys.for_shard(1).completions_stream) == 0  # no entry from the expired part
    run_orchestrator()
    assert client.get_run(run_id).status == "completed"


def test_the_sweeper_finishes_a_run_no_part_of_which_completed(sharded_client: Client, raw_redis: redis.Redis) -> None:
    client, keys = sharded_client, sharded_client.keys
    run_id = _run_spanning(client, 30, None)
    for shard in keys.shards:
        raw_redis.delete(shard.group(run_id))
    for shard in range(SHARDS):
        _finish_part(client, run_id, 30, shard)
    ctx = TaskContext.from_environment()
    assert ctx.keys.shard_count == SHARDS
    assert GroupSweeper(ctx).sweep_once().finishes == 1
    run_orchestrator()
    assert client.get_run(run_id).status == "completed"
    assert GroupSweeper(ctx).sweep_once().finishes == 0


def test_a_redis_cluster_needs_an_orchestration_redis_url() -> None:
    cluster = "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"
    with pytest.raises(ConfigurationError, match="DRAGOMAN_ORCHESTRATION_REDIS_URL"):
        orchestration_redis_url(Settings(redis_url=cluster))
    single = "redis://127.0.0.1:6379/0"
    assert orchestration_redis_url(Settings(redis_url=cluster, orchestration_redis_url=single)) == single
    assert orchestration_redis_url(Settings(redis_url=single)) == single  # the default: the queue's own server
    with pytest.raises(ConfigurationError, match="single Redis server"):
        orchestration_redis_url(Settings(redis_url=single, orchestration_redis_url=cluster))


def test_the_orchestrator_and_the_api_refuse_to_start_on_a_cluster_without_it(
    settings_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api.app import create_app

    cluster = "redis+cluster://127.0.0.1:1"
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", cluster)
    with pytest.raises(ConfigurationError, match="DRAGOMAN_ORCHESTRATION_REDIS_URL"):
        TaskContext.from_environment()
    on_cluster = settings_env.model_copy(update={"redis_url": cluster})
    with pytest.raises(ConfigurationError, match="DRAGOMAN_ORCHESTRATION_REDIS_URL"):
        create_app(on_cluster)
    with Client(on_cluster) as producer, pytest.raises(ConfigurationError, match="ORCHESTRATION_REDIS_URL"):
        producer.submit_document("Hello.", "txt", "en", "fr")  # refused before it is stored
    monkeypatch.setenv("DRAGOMAN_ORCHESTRATION_REDIS_URL", settings_env.redis_url or "")
    assert TaskContext.from_environment().orchestration_redis_url == settings_env.redis_url


@pytest.fixture
def on_cluster(cluster_settings: Settings, service_urls: ServiceUrls, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Three shards on a real Redis Cluster, RQ on the session's single embedded Redis (in the environment too,
    for the RQ tasks)."""
    assert cluster_settings.redis_url and cluster_settings.database_url
    settings = cluster_settings.model_copy(
        update={"orchestration_redis_url": service_urls.redis_url, "webhook_secret": "test-secret"}
    )
    for name, value in {
        "REDIS_URL": cluster_settings.redis_url,
        "DATABASE_URL": cluster_settings.database_url,
        "KEY_PREFIX": cluster_settings.key_prefix,
        "DATA_DIR": str(cluster_settings.data_dir),
        "MEMORY_ENABLED": "false",
        "REDIS_SHARDS": str(cluster_settings.redis_shards),
        "ORCHESTRATION_REDIS_URL": service_urls.redis_url,
        "WEBHOOK_SECRET": "test-secret",
        "WEBHOOK_RETRY_SECONDS": "[0, 0, 0]",
    }.items():
        monkeypatch.setenv(f"DRAGOMAN_{name}", value)
    assert settings.redis_shards == SHARDS
    return settings


def test_a_run_spanning_a_redis_cluster_finishes_once(on_cluster: Settings, hook: tuple[str, type[_Hook]]) -> None:
    url, handler = hook
    with Client(on_cluster) as client:
        assert is_cluster(client.core.redis)
        run_id = _finishes_once_when_the_last_part_completes(client, handler, url)
        nodes = {client.core.redis.get_node_from_key(s.group(run_id)).name for s in client.keys.shards}  # type: ignore[attr-defined]
        assert len(nodes) > 1  # the parts lived on different primaries
