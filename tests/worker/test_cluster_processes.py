"""``dragoman worker`` and ``dragoman rq-worker`` on a real Redis Cluster, with a primary killed mid-work.

The single-server counterpart is ``test_worker_command.py``. Here the same commands run against a
local cluster of three primaries and three replicas
(:class:`storage.embedded_cluster.EmbeddedCluster`) with ``DRAGOMAN_REDIS_SHARDS=3``, every shard on
its own primary; RQ runs on the single embedded server (``DRAGOMAN_ORCHESTRATION_REDIS_URL``).
Submitting waits for a replica (``DRAGOMAN_SUBMIT_WAIT_REPLICAS=1``), so killing a primary while
jobs flow loses none of them: its replica takes over, and what the old primary acknowledged but
never replicated (finished states, acks) is done again, once more at most, never lost. The worker
runs the echo engine: what a failover does to the queue does not depend on the model, and the real
engine's own process test is ``test_worker_command.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from redis.cluster import RedisCluster

from broker.keys import RedisKeys
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage import libpq_url
from storage.embedded_cluster import EmbeddedCluster
from tests.conftest import settings_for
from tests.waiting import FOREVER, wait_for

from .conftest import spread_prefix

pytestmark = pytest.mark.timeout(300)

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "getting-started.md"
SHARDS = 3


def _dragoman(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", *args]


def test_worker_and_orchestrator_on_a_cluster_lose_nothing_when_a_primary_dies(
    own_cluster: EmbeddedCluster, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    prefix = spread_prefix(own_cluster, SHARDS)
    settings = Settings(
        **{
            **settings_for(service_urls, tmp_path / "data").model_dump(exclude_unset=True),
            "redis_url": own_cluster.url,
            "redis_shards": SHARDS,
            "key_prefix": prefix,
            "orchestration_redis_url": service_urls.redis_url,
            "submit_wait_replicas": 1,
        }
    )
    keys = RedisKeys.from_settings(settings)
    assert settings.database_url
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": own_cluster.url,
        "DRAGOMAN_REDIS_SHARDS": str(SHARDS),
        "DRAGOMAN_ORCHESTRATION_REDIS_URL": service_urls.redis_url,
        "DRAGOMAN_SUBMIT_WAIT_REPLICAS": "1",
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": prefix,
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
        "DRAGOMAN_VISIBILITY_TIMEOUT_SECONDS": "5",
        "DRAGOMAN_RECLAIM_INTERVAL_SECONDS": "1",
    }
    texts = [f"Sentence number {i} is about the weather in the mountains." for i in range(30)]
    log, rq_log = tmp_path / "worker.log", tmp_path / "rq-worker.log"
    with Client(settings) as client, open(log, "w") as out, open(rq_log, "w") as rq_out:
        ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
        assert {keys.shard_of(job_id) for job_id in ids} == set(range(SHARDS))  # every shard has work
        worker = subprocess.Popen(
            _dragoman("worker", "--engine", "echo", "--echo-delay-ms", "100", "--max-in-flight", "4"),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        orchestrator = subprocess.Popen(_dragoman("rq-worker"), stdout=rq_out, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(
                lambda: sum(client.get(i).status is JobStatus.SUCCEEDED for i in ids) >= 3 or worker.poll() is not None,
                "the first translations",
            )
            assert worker.poll() is None, log.read_text()[-3000:]
            victim = own_cluster.primary_of(keys.for_shard(1).jobs_stream)
            promoted = own_cluster.replicas_of(victim)
            own_cluster.kill_node(victim)
            wait_for(
                lambda: any(n.port in promoted and n.role == "primary" for n in own_cluster.nodes()), "the failover"
            )
            jobs = client.wait_many(ids, timeout=FOREVER)
            own_cluster.start_node(victim)  # it comes back as the replica of the one that replaced it
            own_cluster.wait_healthy()
            translated = subprocess.run(
                _dragoman(
                    "translate",
                    str(SAMPLE),
                    "--from",
                    "en",
                    "--to",
                    "fr",
                    "-o",
                    str(tmp_path / "out.md"),
                    "--no-progress",
                ),
                env=env,
                capture_output=True,
                text=True,
            )
            stats = subprocess.run(_dragoman("stats"), env=env, capture_output=True, text=True)
        finally:
            orchestrator.send_signal(signal.SIGTERM)
            worker.send_signal(signal.SIGTERM)
            orchestrator_code = orchestrator.wait()
            code = worker.wait()
    output = log.read_text()
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * len(ids), output[-3000:]  # nothing lost
    assert all(j.translation == f"[echo] {text}" for j, text in zip(jobs, texts, strict=True))
    assert translated.returncode == 0, translated.stderr + rq_log.read_text()[-3000:]
    assert (tmp_path / "out.md").read_text() != SAMPLE.read_text()
    assert stats.returncode == 0, stats.stderr
    assert code == 0 and orchestrator_code == 0, output[-3000:] + rq_log.read_text()[-3000:]
    assert "Traceback" not in output
    with psycopg.connect(libpq_url(settings.database_url)) as db:
        rows = db.execute("SELECT count(*), count(DISTINCT id) FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)).fetchone()
    assert rows == (len(ids), len(ids))  # one row each: a job done twice after the failover is upserted
    raw = RedisCluster(host="127.0.0.1", port=own_cluster.ports[0], decode_responses=True)
    try:
        for shard in keys.shards:
            for _, lane in shard.lanes:
                assert raw.xpending(lane, shard.consumer_group)["pending"] == 0, (shard.shard, lane)
    finally:
        raw.close()
