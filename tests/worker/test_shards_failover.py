"""An in-process worker (deterministic engine) on a real Redis Cluster whose primary dies while jobs flow.

Three shards on three primaries; the primary of shard 1 is killed (SIGKILL) while the worker runs, its
replica takes over. Every job must then finish: a row each, no entry left pending or unread on any
shard's lanes, every state record final (what the old primary had not replicated — acks, finished
states — is done again once, the upsert absorbing the second row).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from broker.keys import RedisKeys
from contract.ids import new_job_id_on_shard
from contract.schemas import JobSpec, Lane
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.wire import encode_job_entry
from storage.embedded_cluster import EmbeddedCluster
from tests.conftest import settings_for
from tests.waiting import until
from worker.deterministic_engine import DeterministicEngine

from .conftest import identity_worker, spread_prefix

pytestmark = [pytest.mark.timeout(300)]

SHARDS = 3
PER_SHARD = 120


async def _until(condition: Any, what: str) -> None:
    await until(lambda: asyncio.to_thread(condition), what)


def _rows(pg: Any, ids: list[str]) -> dict[str, str]:
    rows = pg.execute("SELECT id::text, status FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
    return {row[0]: row[1] for row in rows}


def _unfinished_entries(raw: RedisCluster, shards: list[RedisKeys]) -> dict[str, int]:
    """Per lane of every shard: entries pending (read, not acknowledged) plus entries never read (lag)."""
    left: dict[str, int] = {}
    for keys in shards:
        for _, stream in keys.lanes:
            for group in raw.xinfo_groups(stream):
                if group["name"] == keys.consumer_group:
                    lag = group.get("lag")
                    left[stream] = int(group["pending"]) + (int(lag) if lag is not None else 0)
    return left


async def test_every_job_finishes_when_a_shards_primary_is_killed_under_an_in_process_worker(
    own_cluster: EmbeddedCluster, service_urls: ServiceUrls, tmp_path: Path, pg: Any
) -> None:
    prefix = spread_prefix(own_cluster, SHARDS)
    settings = Settings(
        **{
            **settings_for(service_urls, tmp_path / "data").model_dump(exclude_unset=True),
            "redis_url": own_cluster.url,
            "redis_shards": SHARDS,
            "key_prefix": prefix,
            "reclaim_interval_seconds": 0.5,
        }
    )
    # The default visibility timeout (300 s): entries left pending under the live worker by the failover (acks
    # the old primary had not replicated) must run again without waiting for it.
    assert settings.visibility_timeout_seconds >= 300
    keys = RedisKeys.from_settings(settings)
    shards = keys.shards
    raw = RedisCluster(host="127.0.0.1", port=own_cluster.ports[0], decode_responses=True)
    ids: list[str] = []
    for shard in range(SHARDS):
        for i in range(PER_SHARD):
            job_id = new_job_id_on_shard(shard, SHARDS)
            lane = Lane.BULK if i % 4 == 0 else Lane.INTERACTIVE
            spec = JobSpec(
                job_id=job_id,
                text=f"s{shard} {i}",
                source_lang="en",
                target_lang="fr",
                lane=lane,
                created_at=time.time(),
            )
            raw.xadd(shards[shard].lane(lane), dict[Any, Any](encode_job_entry(spec)))
            ids.append(job_id)
    for node in own_cluster.nodes():  # every queued entry is on a replica before anything is killed
        if node.role == "primary":
            with redis.Redis(port=node.port) as primary:
                assert primary.execute_command("WAIT", 1, 5000) >= 1
    victim = own_cluster.primary_of(shards[1].jobs_stream)
    promoted = own_cluster.replicas_of(victim)
    engine = DeterministicEngine(delay_s=0.05)
    worker = identity_worker(
        settings, dataclasses.replace(service_urls, redis_url=settings.redis_url), engine, max_in_flight=12
    )
    await worker.start()
    try:
        await _until(lambda: len(_rows(pg, ids)) >= 60, "the first rows")
        own_cluster.kill_node(victim)
        await _until(
            lambda: any(n.port in promoted and n.role == "primary" for n in own_cluster.nodes()), "the failover"
        )
        await _until(lambda: len(_rows(pg, ids)) == len(ids), "every job's row")
        await _until(lambda: not any(_unfinished_entries(raw, shards).values()), "every entry acknowledged")
        states = {job_id: raw.hget(keys.for_job(job_id).state(job_id), "status") for job_id in ids}
        stuck = {job_id: status for job_id, status in states.items() if status not in ("succeeded", None)}
    finally:
        await worker.stop(grace_seconds=5)
        raw.close()
    assert set(_rows(pg, ids).values()) == {"succeeded"}
    assert not stuck, list(stuck.items())[:5]
