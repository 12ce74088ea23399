"""Stats, /metrics gauges, dead letters, readiness and ``dragoman check`` of a deployment of 3 shards.

The shards are 3 hash tags on the one embedded server: what a cluster spreads over nodes is the
same keys, so every number below must come from the right shard's keys (a reader of shard 0
alone, or one that adds a shard twice, gets other totals).
"""

from __future__ import annotations

import json
import time

import pytest
import redis
import redis.asyncio as aioredis
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.dead_letters import DeadLetters
from broker.keys import RedisKeys
from broker.queue_stats import read_queue_stats
from cli.check import check_health
from cli.main import EXIT_OK, main
from contract.errors import InvalidJobError, JobNotFoundError
from contract.ids import new_job_id_on_shard
from contract.schemas import JobSpec, Lane
from contract.settings import Settings
from contract.wire import encode_job_entry
from worker.metrics import WorkerMetrics
from worker.ops_server import OpsServer

SHARDS = 3


@pytest.fixture
def sharded(settings: Settings) -> Settings:
    """The test's settings with 3 shards."""
    return settings.model_copy(update={"redis_shards": SHARDS})


def _fill(raw_redis: redis.Redis, keys: RedisKeys) -> None:
    """A known queue: shard 0 has 2 interactive jobs, shard 1 none but 3 staged by tenant acme (fair share), shard 2
    five interactive (3 of them read by worker-a) and 4 bulk; 30 + 60 jobs finished on shards 0 and 2 this minute;
    dead letters 1, 0 and 2."""
    shard0, shard1, shard2 = keys.shards
    raw_redis.rpush(shard1.rotation(shard1.jobs_stream), "acme")
    for i in range(3):
        raw_redis.xadd(shard1.staging(shard1.jobs_stream, "acme"), {"id": f"s1-staged-{i}"})
    for i in range(2):
        raw_redis.xadd(shard0.jobs_stream, {"id": f"s0-{i}"})
    for i in range(5):
        raw_redis.xadd(shard2.jobs_stream, {"id": f"s2-{i}"})
    for i in range(4):
        raw_redis.xadd(shard2.bulk_jobs_stream, {"id": f"s2-bulk-{i}"})
    raw_redis.xgroup_create(shard2.jobs_stream, keys.consumer_group, id="0")
    raw_redis.xreadgroup(keys.consumer_group, "worker-a", {shard2.jobs_stream: ">"}, count=3)
    now = int(time.time())
    raw_redis.set(shard0.finished_in_second(now), 30)
    raw_redis.set(shard2.finished_in_second(now - 10), 60)
    raw_redis.set(shard2.finished_in_second(now - 90), 1_000)  # outside the minute
    raw_redis.xadd(shard0.dead_letter_stream, {"reason": "a"})
    raw_redis.xadd(shard2.dead_letter_stream, {"reason": "b"})
    raw_redis.xadd(shard2.dead_letter_stream, {"reason": "c"})


async def test_stats_add_up_every_shard_and_show_each(
    sharded: Settings, raw_redis: redis.Redis, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(sharded)
    _fill(raw_redis, keys)
    stats = await read_queue_stats(async_redis, keys)
    assert (stats.length, stats.lag, stats.pending) == (11, 11, 3)
    assert (stats.finished_last_minute, stats.dead_letters) == (90, 3)
    assert {c.name: c.pending for c in stats.consumers} == {"worker-a": 3}
    assert stats.shard_count == SHARDS
    per_shard = [
        (s.shard, s.length, s.lag, s.pending, s.staged, s.finished_last_minute, s.dead_letters) for s in stats.shards
    ]
    assert per_shard == [(0, 2, 2, 0, 0, 30, 1), (1, 0, 3, 0, 3, 0, 0), (2, 9, 6, 3, 0, 60, 2)]
    # The lanes keep one entry per model and lane, every shard's summed, named by shard 0's stream.
    lanes = {lane.lane: lane for lane in stats.lanes}
    assert len(stats.lanes) == 2
    assert (lanes["interactive"].length, lanes["interactive"].lag, lanes["interactive"].pending) == (7, 7, 3)
    assert lanes["interactive"].staged == 3
    assert (lanes["bulk"].length, lanes["bulk"].lag) == (4, 4)
    assert lanes["interactive"].stream == keys.jobs_stream and lanes["interactive"].shard is None
    shard2_lanes = {lane.lane: lane for lane in stats.shards[2].lanes}
    assert shard2_lanes["interactive"].stream == keys.for_shard(2).jobs_stream
    assert (shard2_lanes["interactive"].shard, shard2_lanes["interactive"].lag) == (2, 2)
    assert stats.shards[2].oldest_pending_age_seconds is not None


async def test_one_shard_keeps_todays_snapshot(
    settings: Settings, raw_redis: redis.Redis, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(settings)
    raw_redis.xadd(keys.jobs_stream, {"id": "x"})
    raw_redis.xadd(keys.for_shard(0).dead_letter_stream, {"reason": "a"})
    stats = await read_queue_stats(async_redis, keys)
    assert stats.shard_count == 1 and [s.shard for s in stats.shards] == [0]
    assert (stats.length, stats.dead_letters) == (1, 1)
    assert [lane.shard for lane in stats.lanes] == [None, None]
    assert keys.dead_letter_stream == "{" + settings.key_prefix + "}:dead"  # the names of one shard are today's


def _samples(registry_text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(registry_text)
        for s in family.samples
    }


async def test_gauges_keep_totals_and_add_a_shard_breakdown(
    sharded: Settings, settings: Settings, raw_redis: redis.Redis, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(sharded)
    _fill(raw_redis, keys)
    metrics = WorkerMetrics()
    metrics.update_queue(await read_queue_stats(async_redis, keys, with_workers=False))
    values = _samples(generate_latest(metrics.registry).decode())
    assert values[("dragoman_stream_length", ())] == 11
    assert values[("dragoman_dead_letters", ())] == 3
    assert values[("dragoman_lane_lag", (("lane", "interactive"), ("model", "default")))] == 7
    staged1 = (("lane", "interactive"), ("model", "default"), ("shard", "1"))
    assert values[("dragoman_shard_lane_staged", staged1)] == values[("dragoman_shard_lane_lag", staged1)] == 3
    shard2 = (("lane", "interactive"), ("model", "default"), ("shard", "2"))
    assert values[("dragoman_shard_lane_lag", shard2)] == 2
    assert values[("dragoman_shard_lane_pending", shard2)] == 3
    assert values[("dragoman_shard_lane_stream_length", shard2)] == 5
    assert values[("dragoman_shard_lane_stream_length", (("lane", "bulk"), ("model", "default"), ("shard", "2")))] == 4
    assert values[("dragoman_shard_dead_letters", (("shard", "0"),))] == 1
    assert values[("dragoman_shard_dead_letters", (("shard", "2"),))] == 2
    assert values[("dragoman_shard_jobs_per_second", (("shard", "2"),))] == 1.0

    single = WorkerMetrics()  # one shard: no shard series at all, as before shards
    single.update_queue(await read_queue_stats(async_redis, RedisKeys.from_settings(settings), with_workers=False))
    assert not [name for name, _ in _samples(generate_latest(single.registry).decode()) if "shard" in name]


def test_stats_command_shows_each_shard(
    sharded: Settings, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sharded.redis_url
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", sharded.redis_url)
    monkeypatch.setenv("DRAGOMAN_KEY_PREFIX", sharded.key_prefix)
    monkeypatch.setenv("DRAGOMAN_REDIS_SHARDS", str(SHARDS))
    monkeypatch.delenv("DRAGOMAN_DATABASE_URL", raising=False)
    _fill(raw_redis, RedisKeys.from_settings(sharded))
    assert main(["stats", "--json"]) == EXIT_OK
    stats = json.loads(capsys.readouterr().out)
    assert (stats["length"], stats["lag"], stats["dead_letters"], stats["shard_count"]) == (11, 11, 3, 3)
    assert [s["length"] for s in stats["shards"]] == [2, 0, 9]
    assert main(["stats"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    head = next(at for at, line in enumerate(lines) if line.split()[:2] == ["shard", "length"])
    table = [line.split() for line in lines[head:]]
    assert table[1:4] == [
        ["0", "2", "2", "0", "0", "30", "1"],
        ["1", "0", "3", "0", "3", "0", "0"],
        ["2", "9", "6", "3", "0", "60", "2"],
    ]


def _dead_letter(raw_redis: redis.Redis, keys: RedisKeys, spec: JobSpec, reason: str) -> str:
    """Append ``spec``'s entry to ``keys``' shard's dead-letter stream as a worker does; its entry id."""
    fields = {**encode_job_entry(spec), "reason": reason, "dead_lettered_at": "1.5"}
    return str(raw_redis.xadd(keys.dead_letter_stream, fields))


def _spec(job_id: str, text: str, tenant: str | None = None, lane: Lane | None = None) -> JobSpec:
    return JobSpec(job_id, text, "en", "fr", time.time(), tenant=tenant, lane=lane)


async def test_dead_letters_of_every_shard_are_listed_and_requeued_on_their_own_shard(
    sharded: Settings, raw_redis: redis.Redis, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(sharded)
    on0, on2 = new_job_id_on_shard(0, SHARDS), new_job_id_on_shard(2, SHARDS)
    first = _dead_letter(raw_redis, keys.for_shard(0), _spec(on0, "zero", tenant="acme"), "engine error")
    second = _dead_letter(raw_redis, keys.for_shard(2), _spec(on2, "two", lane=Lane.BULK), "too long")
    letters = DeadLetters(async_redis, sharded)
    listed = await letters.entries()
    assert [(e.shard, e.job_id, e.reason) for e in listed] == [(0, on0, "engine error"), (2, on2, "too long")]
    assert [e.ident for e in listed] == [first, f"2/{second}"]
    assert [e.job_id for e in await letters.entries(count=1)] == [on0]  # the oldest of all shards

    assert await letters.retry(on2) == on2  # by job id: found on its shard
    shard2 = keys.for_shard(2)
    requeued = raw_redis.xrange(shard2.bulk_jobs_stream)
    assert [fields["id"] for _, fields in requeued] == [on2]
    assert raw_redis.hget(shard2.state(on2), "status") == "queued"
    assert raw_redis.xlen(shard2.dead_letter_stream) == 0
    for other in (0, 1):  # nothing leaked onto another shard's lane or record
        assert raw_redis.xlen(keys.for_shard(other).bulk_jobs_stream) == 0
        assert not raw_redis.exists(keys.for_shard(other).state(on2))

    assert await letters.retry(f"0/{first}") == on0  # by shard and entry id
    shard0 = keys.for_shard(0)
    assert [fields["id"] for _, fields in raw_redis.xrange(shard0.jobs_stream)] == [on0]
    assert raw_redis.hget(shard0.state(on0), "tenant") == "acme"
    assert raw_redis.zscore(shard0.tenant_queued("acme"), on0) is not None
    assert await letters.entries() == []


async def test_a_dead_letter_is_requeued_on_its_own_shard_even_if_its_job_hashes_elsewhere(
    sharded: Settings, raw_redis: redis.Redis, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(sharded)
    elsewhere = new_job_id_on_shard(1, SHARDS)
    _dead_letter(raw_redis, keys.for_shard(2), _spec(elsewhere, "moved"), "engine error")
    assert await DeadLetters(async_redis, sharded).retry(elsewhere) == elsewhere
    assert [f["id"] for _, f in raw_redis.xrange(keys.for_shard(2).jobs_stream)] == [elsewhere]
    assert raw_redis.xlen(keys.for_shard(1).jobs_stream) == 0


async def test_an_entry_id_on_two_shards_needs_its_shard_and_purge_empties_every_shard(
    sharded: Settings, raw_redis: redis.Redis, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(sharded)
    job1, job2 = new_job_id_on_shard(1, SHARDS), new_job_id_on_shard(2, SHARDS)
    for shard, job_id in ((1, job1), (2, job2)):
        fields = {**encode_job_entry(_spec(job_id, "same id")), "reason": "r"}
        raw_redis.xadd(keys.for_shard(shard).dead_letter_stream, fields, id="5-0")
    letters = DeadLetters(async_redis, sharded)
    with pytest.raises(InvalidJobError, match="1/5-0 or 2/5-0"):
        await letters.retry("5-0")
    with pytest.raises(JobNotFoundError, match="3 shards"):
        await letters.retry("7/5-0")
    assert await letters.retry("2/5-0") == job2
    assert [f["id"] for _, f in raw_redis.xrange(keys.for_shard(2).jobs_stream)] == [job2]
    raw_redis.xadd(keys.for_shard(0).dead_letter_stream, {"reason": "x"})
    assert await letters.purge() == 2
    assert all(raw_redis.xlen(k.dead_letter_stream) == 0 for k in keys.shards)


def test_check_reports_the_shards(sharded: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    report = check_health(sharded, require_worker=False)
    assert report.healthy and report.redis_ok
    assert report.redis_layout == "one server, 3 shards"
    assert check_health(sharded.model_copy(update={"redis_shards": 1}), require_worker=False).redis_layout == ""


async def test_readiness_reports_the_shards(sharded: Settings, settings: Settings) -> None:
    assert sharded.redis_url and sharded.database_url
    for given, layout in (
        (sharded, {"cluster": False, "primaries": 1, "healthy_primaries": 1, "shards": 3}),
        (settings, None),
    ):
        ops = OpsServer(
            given,
            redis_url=sharded.redis_url,
            database_url=sharded.database_url,
            metrics=WorkerMetrics(),
            engine_state=lambda: "ok",
        )
        try:
            readiness = await ops.readiness()
        finally:
            await ops.close()
        assert readiness.ready
        assert json.loads(readiness.to_json()).get("redis") == layout


def test_dead_command_lists_each_shard_and_retries_by_shard_and_id(
    sharded: Settings, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sharded.redis_url and sharded.database_url
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", sharded.redis_url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", sharded.database_url)
    monkeypatch.setenv("DRAGOMAN_KEY_PREFIX", sharded.key_prefix)
    monkeypatch.setenv("DRAGOMAN_REDIS_SHARDS", str(SHARDS))
    keys = RedisKeys.from_settings(sharded)
    on0, on2 = new_job_id_on_shard(0, SHARDS), new_job_id_on_shard(2, SHARDS)
    first = _dead_letter(raw_redis, keys.for_shard(0), _spec(on0, "zero"), "engine error")
    second = _dead_letter(raw_redis, keys.for_shard(2), _spec(on2, "two"), "too long")
    assert main(["dead", "list"]) == EXIT_OK
    assert capsys.readouterr().out.splitlines() == [
        f"{first}  job {on0}  engine error",
        f"2/{second}  job {on2}  too long",
        "2 dead letters shown",
    ]
    assert main(["dead", "retry", f"2/{second}"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"job {on2} queued again"
    assert [f["id"] for _, f in raw_redis.xrange(keys.for_shard(2).jobs_stream)] == [on2]
    assert main(["dead", "purge"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == "purged 1 dead letter"
