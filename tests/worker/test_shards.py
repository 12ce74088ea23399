"""A worker reading a sharded deployment (``DRAGOMAN_REDIS_SHARDS=3``) on one server: each shard its own hash tag.

Every job here is queued the way a plain-``XADD`` producer does it, on the shard its id hashes to
(``contract.ids.new_job_id_on_shard``), so these tests need nothing of the producer's shard support:
they check the worker reads every shard, starts and finishes each job on the shard it was read from
(acks, events, dead letters), reclaims and cancels per shard, and shares its slots fairly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from redis.exceptions import ClusterDownError
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.keys import RedisKeys, shard_tag
from broker.redis_client import is_cluster_url
from contract.ids import new_job_id_on_shard
from contract.schemas import JobSpec, Lane
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.wire import encode_job_entry
from tests.waiting import until
from worker import consumer as consumer_module
from worker import writer as writer_module
from worker.deterministic_engine import DeterministicEngine
from worker.service import Worker

from .conftest import identity_worker

SHARDS = 3


@pytest.fixture(params=["server", "cluster"])
def sharded(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """The test's settings with three shards: on the embedded server (each shard its own tag), or on a real
    Redis Cluster (each shard its own slot: the ``cluster_settings`` fixture)."""
    if request.param == "cluster":
        on_cluster: Settings = request.getfixturevalue("cluster_settings")
        assert on_cluster.redis_shards == SHARDS
        return on_cluster
    return settings.model_copy(update={"redis_shards": SHARDS})


@pytest.fixture
def raw(sharded: Settings) -> Iterator[redis.Redis]:
    """A plain synchronous client of the test's Redis (a cluster client on a cluster), for what a producer
    in another language would do by hand."""
    url = sharded.redis_url
    if is_cluster_url(url):
        host, _, port = urlsplit(url).netloc.split(",")[0].rpartition("@")[2].partition(":")
        connection: redis.Redis = redis.RedisCluster(host=host, port=int(port), decode_responses=True)  # type: ignore[assignment]
    else:
        connection = redis.Redis.from_url(url, decode_responses=True)
    yield connection
    connection.close()


def _keys(settings: Settings) -> RedisKeys:
    return RedisKeys.from_settings(settings)


def _queue(raw: redis.Redis, settings: Settings, shard: int, text: str, lane: Lane = Lane.INTERACTIVE) -> str:
    """XADD one job to ``shard``'s lane, as a plain producer would; return its id (which hashes to that shard)."""
    job_id = new_job_id_on_shard(shard, SHARDS)
    keys = _keys(settings).for_shard(shard)
    assert keys.shard_of(job_id) == shard
    spec = JobSpec(job_id=job_id, text=text, source_lang="en", target_lang="fr", created_at=time.time(), lane=lane)
    raw.xadd(keys.lane(lane), dict[Any, Any](encode_job_entry(spec)))
    return job_id


def _statuses(pg: Any, ids: list[str]) -> dict[str, str]:
    rows = pg.execute("SELECT id::text, status FROM jobs WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
    return {row[0]: row[1] for row in rows}


async def _until(condition: Any, what: str) -> None:
    await until(lambda: asyncio.to_thread(condition), what)


def _pending(raw: redis.Redis, keys: RedisKeys) -> int:
    return sum(int(raw.xpending(stream, keys.consumer_group)["pending"]) for _, stream in keys.lanes)


def _worker(settings: Settings, urls: ServiceUrls, engine: DeterministicEngine, **kwargs: Any) -> Worker:
    return identity_worker(settings, dataclasses.replace(urls, redis_url=settings.redis_url), engine, **kwargs)


async def test_jobs_on_every_shard_finish_there_acked_with_their_events(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    ids = {
        shard: [
            _queue(raw, sharded, shard, f"s{shard} job {i}", Lane.BULK if i % 3 == 0 else Lane.INTERACTIVE)
            for i in range(12)
        ]
        for shard in range(SHARDS)
    }
    every = [job_id for shard_ids in ids.values() for job_id in shard_ids]
    worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=8)
    await worker.start()
    try:
        await _until(
            lambda: set(_statuses(pg, every).values()) == {"succeeded"} and len(_statuses(pg, every)) == 36,
            what="every job's row",
        )
        shards = _keys(sharded).shards
        await _until(lambda: all(_pending(raw, keys) == 0 for keys in shards), what="every shard's acks")
    finally:
        await worker.stop(grace_seconds=5)
    for keys in shards:
        assert keys.tag == shard_tag(keys.prefix, keys.shard) and keys.shard_count == SHARDS
        events = raw.xrange(keys.events_stream)
        assert sorted(fields["id"] for _, fields in events) == sorted(ids[keys.shard])  # each on its own shard
        assert raw.xlen(keys.dead_letter_stream) == 0
        groups = {g["name"] for _, stream in keys.lanes for g in raw.xinfo_groups(stream)}
        assert groups == {keys.consumer_group}  # the group was made on every shard's lanes


async def test_a_stale_entry_on_shard_2_is_reclaimed(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("worker.consumer.HEARTBEAT_TTL_S", 0)
    settings = sharded.model_copy(update={"visibility_timeout_seconds": 0.3, "reclaim_interval_seconds": 0.1})
    worker = _worker(settings, service_urls, DeterministicEngine(), max_in_flight=8)
    await worker.consumer.ensure_group()
    keys = _keys(settings).for_shard(2)
    job_id = _queue(raw, settings, 2, "left behind by a dead worker")
    raw.xreadgroup(keys.consumer_group, "ghost", {keys.jobs_stream: ">"}, count=10)  # read, never acked
    assert _pending(raw, keys) == 1
    await worker.start()
    try:
        await _until(lambda: _statuses(pg, [job_id]) == {job_id: "succeeded"}, what="the reclaimed job's row")
        await _until(lambda: _pending(raw, keys) == 0, what="the ack on shard 2")
    finally:
        await worker.stop(grace_seconds=5)
    assert worker.consumer.reclaimed == 1
    [(_, event)] = raw.xrange(keys.events_stream)
    assert event["id"] == job_id


async def test_a_dead_letter_from_shard_1_lands_in_shard_1s_dead_letter_stream(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    shards = _keys(sharded).shards
    raw.xadd(shards[1].bulk_jobs_stream, {"garbage": "yes"})
    good = _queue(raw, sharded, 1, "still works")
    worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=4)
    await worker.start()
    try:
        await _until(lambda: raw.xlen(shards[1].dead_letter_stream) == 1, what="the dead letter")
        await _until(lambda: _statuses(pg, [good]) == {good: "succeeded"}, what="the good job's row")
        await _until(lambda: _pending(raw, shards[1]) == 0, what="the acks on shard 1")
    finally:
        await worker.stop(grace_seconds=5)
    [(_, letter)] = raw.xrange(shards[1].dead_letter_stream)
    assert letter["garbage"] == "yes" and letter["reason"]
    assert [raw.xlen(keys.dead_letter_stream) for keys in shards] == [0, 1, 0]


async def test_a_running_job_on_shard_2_is_cancelled(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    engine = DeterministicEngine(delay_for=lambda prompt: 60.0 if prompt == "slow" else 0.0)
    slow = _queue(raw, sharded, 2, "slow")
    worker = _worker(sharded, service_urls, engine, max_in_flight=4)
    await worker.start()
    try:
        await _until(lambda: engine.in_flight == 1, what="the slow job's start")
        keys = _keys(sharded).for_shard(2)
        assert raw.hget(keys.state(slow), "status") == "running"  # START ran on the job's own shard
        raw.publish(keys.control_channel, f"cancel {slow}")
        await _until(lambda: _statuses(pg, [slow]) == {slow: "cancelled"}, "the cancelled row")
        await _until(lambda: _pending(raw, keys) == 0, what="the ack on shard 2")
    finally:
        await worker.stop(grace_seconds=1)
    assert engine.aborted and engine.aborted[0].startswith(slow)


async def test_no_shard_is_starved_each_makes_progress_within_the_first_reads(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    ids = {shard: [_queue(raw, sharded, shard, f"s{shard} {i}") for i in range(300)] for shard in range(SHARDS)}
    worker = _worker(sharded, service_urls, DeterministicEngine(delay_s=0.01), max_in_flight=16)
    reads: list[tuple[int, int]] = []  # (shard, entries) of each read, in order
    dispatch = worker.consumer.dispatch

    async def spy(entries: Any, lane: Lane, shard: int = 0) -> None:
        reads.append((shard, len(entries)))
        await dispatch(entries, lane, shard)

    worker.consumer.dispatch = spy  # type: ignore[method-assign]
    await worker.start()
    try:
        await _until(lambda: len(reads) >= 30, what="30 reads")
        first = reads[:6]
        done = _statuses(pg, [job_id for shard_ids in ids.values() for job_id in shard_ids])
    finally:
        await worker.stop(grace_seconds=5)
    assert {shard for shard, _ in first} == set(range(SHARDS)), first  # every shard within the first reads
    per_shard = {shard: sum(n for s, n in reads[:30] if s == shard) for shard in range(SHARDS)}
    most, least = max(per_shard.values()), min(per_shard.values())
    # Slots shared, not taken by whichever shard came first (3x: on a loaded machine a cluster's nodes
    # answer at different speeds; a starved shard gets none or a few).
    assert least > 0 and most <= 3 * least, per_shard
    finished = {shard: sum(1 for job_id in ids[shard] if job_id in done) for shard in range(SHARDS)}
    assert all(finished.values()), finished


async def test_one_shard_keeps_todays_single_read_loop(settings: Settings, service_urls: ServiceUrls) -> None:
    """The default (one shard): one loop over the unsuffixed names, whose reads may take every free slot."""
    worker = _worker(settings, service_urls, DeterministicEngine(), max_in_flight=4)
    assert worker.consumer.shards == 1
    assert worker.consumer._read_most == consumer_module._MAX_READ  # no per-shard share
    assert worker.consumer._shards[0].keys.jobs_stream == f"{{{settings.key_prefix}}}:jobs"
    three = _worker(
        settings.model_copy(update={"redis_shards": SHARDS}), service_urls, DeterministicEngine(), max_in_flight=12
    )
    assert three.consumer._read_most == 4  # each shard's read takes at most its share


async def test_empty_shards_waiting_for_jobs_leave_the_slots_to_the_busy_one(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    """Shards 1 and 2 have nothing: their blocking reads keep two slots each, not their share of the worker."""
    sharded = sharded.model_copy(update={"read_block_ms": 2000})
    ids = [_queue(raw, sharded, 0, f"busy {i}") for i in range(60)]
    engine = DeterministicEngine(delay_s=0.2)
    worker = _worker(sharded, service_urls, engine, max_in_flight=12)
    await worker.start()
    try:
        await _until(lambda: len(_statuses(pg, ids)) == 60, what="the busy shard's rows")
    finally:
        await worker.stop(grace_seconds=5)
    assert engine.peak_in_flight >= 12 - 2 * 2, engine.peak_in_flight


async def test_a_failing_shard_is_backed_off_alone_and_logged_once(
    sharded: Settings,
    service_urls: ServiceUrls,
    raw: redis.Redis,
    pg: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Shard 1's server is away (its primary failing over): shards 0 and 2 are read and acknowledged all the same,
    shard 1's acknowledgements wait in the writer's retry, and everything is finished once it is back."""
    down = {"read": True, "ack": True}
    ids = {shard: [_queue(raw, sharded, shard, f"s{shard} {i}") for i in range(5)] for shard in range(SHARDS)}
    worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=8)
    read_lanes = worker.consumer._read_lanes
    acknowledge = writer_module.acknowledge_writer_batch

    async def failing_read(shard: Any, counts: Any) -> Any:
        if shard.number == 1 and down["read"]:
            raise ClusterDownError("CLUSTERDOWN The cluster is down (simulated)")
        return await read_lanes(shard, counts)

    async def failing_ack(redis_: Any, keys: RedisKeys, *args: Any) -> None:
        if keys.shard == 1 and down["ack"]:
            raise RedisConnectionError("Connection refused (simulated)")
        await acknowledge(redis_, keys, *args)

    worker.consumer._read_lanes = failing_read  # type: ignore[method-assign]
    monkeypatch.setattr(writer_module, "acknowledge_writer_batch", failing_ack)
    shards = _keys(sharded).shards
    await worker.start()
    try:
        others = ids[0] + ids[2]
        await _until(lambda: len(_statuses(pg, others)) == 10, what="the healthy shards' rows")
        await _until(lambda: _pending(raw, shards[0]) == _pending(raw, shards[2]) == 0, what="their acks")
        assert not _statuses(pg, ids[1])  # shard 1 was not read
        down["read"] = False  # shard 1 answers reads again, not yet its acknowledgements
        await _until(lambda: len(_statuses(pg, ids[1])) == 5, what="shard 1's rows")
        late = _queue(raw, sharded, 0, "queued while shard 1 still cannot acknowledge")
        await _until(lambda: _statuses(pg, [late]) == {late: "succeeded"}, what="a later job of shard 0")
        await _until(lambda: _pending(raw, shards[0]) == 0, what="its ack, while shard 1's wait")
        assert _pending(raw, shards[1]) == 5
        down["ack"] = False
        await _until(lambda: _pending(raw, shards[1]) == 0, what="shard 1's acks")
    finally:
        await worker.stop(grace_seconds=5)
    warnings = [r.getMessage() for r in caplog.records if "shard 1" in r.getMessage() and r.levelname == "WARNING"]
    reads = [message for message in warnings if "while reading" in message]
    assert len(reads) == 1, warnings  # once per outage, however many retries
    assert len(raw.xrange(shards[1].events_stream)) == 5


async def test_sigterm_with_a_shard_down_for_good_stops(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 1 never acknowledges again (its primary gone for good): stopping the worker still ends (the writer gives
    the acks up after ``GIVE_UP_ACKS_AFTER_S``); shard 1's rows are committed and its entries left pending for
    another worker, the others acked."""
    monkeypatch.setattr(writer_module, "GIVE_UP_ACKS_AFTER_S", 1.0)
    ids = {shard: [_queue(raw, sharded, shard, f"s{shard} {i}") for i in range(4)] for shard in range(SHARDS)}
    worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=8)
    acknowledge = writer_module.acknowledge_writer_batch

    async def failing_ack(redis_: Any, keys: RedisKeys, *args: Any) -> None:
        if keys.shard == 1:
            raise RedisConnectionError("Connection refused (simulated)")
        await acknowledge(redis_, keys, *args)

    monkeypatch.setattr(writer_module, "acknowledge_writer_batch", failing_ack)
    shards = _keys(sharded).shards
    await worker.start()
    try:
        every = [job_id for shard_ids in ids.values() for job_id in shard_ids]
        await _until(lambda: len(_statuses(pg, every)) == 12, what="every row")
        await _until(lambda: _pending(raw, shards[0]) == _pending(raw, shards[2]) == 0, what="the healthy acks")
    finally:
        await worker.stop(grace_seconds=1)  # a stop that waited for the dead shard's acks would never end
    assert _pending(raw, shards[1]) == 4  # left for another worker: delivered again, the upsert absorbs it


async def test_sigterm_with_the_only_shard_down_for_good_stops(
    settings: Settings, service_urls: ServiceUrls, raw_redis: redis.Redis, pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One shard (the default) whose Redis stops answering acknowledgements: the stop ends all the same."""
    monkeypatch.setattr(writer_module, "GIVE_UP_ACKS_AFTER_S", 1.0)
    job_id = new_job_id_on_shard(0, 1)
    keys = _keys(settings)
    spec = JobSpec(job_id=job_id, text="t", source_lang="en", target_lang="fr", created_at=time.time())
    raw_redis.xadd(keys.jobs_stream, dict[Any, Any](encode_job_entry(spec)))
    worker = _worker(settings, service_urls, DeterministicEngine(), max_in_flight=4)

    async def failing_ack(*args: Any) -> None:
        raise RedisConnectionError("Connection refused (simulated)")

    monkeypatch.setattr(writer_module, "acknowledge_writer_batch", failing_ack)
    await worker.start()
    try:
        await _until(lambda: _statuses(pg, [job_id]) == {job_id: "succeeded"}, what="the row")
    finally:
        await worker.stop(grace_seconds=1)  # a stop that waited for the dead shard's acks would never end
    assert _pending(raw_redis, keys) == 1


def _leaked_transport_error() -> None:
    """Raise what redis-py 8.1 leaks when a connection breaks under it (redis/redis-py#4287), from a redis-py frame."""
    code = "def send(writer):\n    writer.writelines([b'PING'])\n"
    scope: dict[str, Any] = {"__name__": "redis.asyncio.connection"}
    exec(compile(code, "redis/asyncio/connection.py", "exec"), scope)
    scope["send"](None)


async def test_a_broken_connection_leaking_an_attribute_error_does_not_end_the_reading(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    """A primary killed under the worker: redis-py leaks ``AttributeError`` instead of ``ConnectionError`` from a
    read and from a START on shard 1; both are that shard's outage, and every job still finishes."""
    ids = {shard: [_queue(raw, sharded, shard, f"s{shard} {i}") for i in range(6)] for shard in range(SHARDS)}
    worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=8)
    faults = {"read": 1, "start": 1}
    read_lanes, mark_started = worker.consumer._read_lanes, worker.consumer._mark_started

    async def leaky_read(shard: Any, counts: Any) -> Any:
        if shard.number == 1 and faults["read"]:
            faults["read"] -= 1
            _leaked_transport_error()
        return await read_lanes(shard, counts)

    async def leaky_start(shard: Any, decoded: Any, now: float) -> Any:
        if shard.number == 1 and faults["start"]:
            faults["start"] -= 1
            _leaked_transport_error()
        return await mark_started(shard, decoded, now)

    worker.consumer._read_lanes = leaky_read  # type: ignore[method-assign]
    worker.consumer._mark_started = leaky_start  # type: ignore[method-assign]
    settings = sharded.model_copy(update={"visibility_timeout_seconds": 1.0, "reclaim_interval_seconds": 0.2})
    worker.consumer._settings = settings  # the entry whose START failed is pending here: reclaimed when stale
    every = [job_id for shard_ids in ids.values() for job_id in shard_ids]
    await worker.start()
    try:
        await _until(lambda: _statuses(pg, every) == dict.fromkeys(every, "succeeded"), what="every job's row")
        assert worker._reader is not None and not worker._reader.done()
    finally:
        await worker.stop(grace_seconds=5)
    assert faults == {"read": 0, "start": 0}


async def test_entries_left_pending_under_the_live_worker_by_an_outage_run_when_the_shard_is_back(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    """After shard 1's outage, entries pending under this (live) consumer that it does not run — a START that
    failed, an acknowledgement a failed-over primary lost — run at once, not after the visibility timeout."""
    assert sharded.visibility_timeout_seconds >= 300  # nobody would reclaim them within this test
    worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=8)
    await worker.consumer.ensure_group()
    keys = _keys(sharded).for_shard(1)
    lost_ack = _queue(raw, sharded, 1, "its ack was lost with the old primary")
    raw.xreadgroup(keys.consumer_group, worker.consumer.consumer_name, {keys.jobs_stream: ">"}, count=10)
    failed_start = _queue(raw, sharded, 1, "its START met the outage")
    down = {"read": True, "start": 1}
    read_lanes, mark_started = worker.consumer._read_lanes, worker.consumer._mark_started
    worker.consumer._shards[1].own_cursor = dict.fromkeys(Lane, ">")  # as if already resumed before the outage

    async def failing_read(shard: Any, counts: Any) -> Any:
        if shard.number == 1 and down["read"]:
            raise RedisConnectionError("Connection refused (simulated)")
        return await read_lanes(shard, counts)

    async def failing_start(shard: Any, decoded: Any, now: float) -> Any:
        if shard.number == 1 and down["start"] and any(spec.job_id == failed_start for _, spec in decoded):
            down["start"] -= 1
            raise RedisConnectionError("Connection refused (simulated)")
        return await mark_started(shard, decoded, now)

    worker.consumer._read_lanes = failing_read  # type: ignore[method-assign]
    worker.consumer._mark_started = failing_start  # type: ignore[method-assign]
    await worker.start()
    try:
        await asyncio.sleep(0.5)
        down["read"] = False
        both = [lost_ack, failed_start]
        await _until(lambda: _statuses(pg, both) == dict.fromkeys(both, "succeeded"), "both rows")
        await _until(lambda: _pending(raw, keys) == 0, "their acks")
    finally:
        await worker.stop(grace_seconds=5)
    assert down["start"] == 0


async def test_two_models_on_three_shards_each_worker_reads_its_models_lanes_of_every_shard(
    sharded: Settings, service_urls: ServiceUrls, raw: redis.Redis, pg: Any
) -> None:
    """A worker of the default model and one of ``small`` on the same 3 shards: each runs its own model's jobs
    from every shard's lanes (never the other's), finishing them on the shard they were read from."""
    small = sharded.model_copy(update={"served_model_names": ["small"]})
    ids: dict[str, dict[int, list[str]]] = {"default": {}, "small": {}}
    for shard in range(SHARDS):
        for model in ("default", "small"):
            keys = _keys(sharded).for_shard(shard)
            if model == "small":
                keys = keys.for_model("small")
            batch = []
            for i in range(4):
                job_id = new_job_id_on_shard(shard, SHARDS)
                lane = Lane.BULK if i % 2 else Lane.INTERACTIVE
                spec = JobSpec(
                    job_id=job_id, text=f"{model} {i}", source_lang="en", target_lang="fr", created_at=time.time()
                )
                raw.xadd(keys.lane(lane), dict[Any, Any](encode_job_entry(spec)))
                batch.append(job_id)
            ids[model][shard] = batch
    default_worker = _worker(sharded, service_urls, DeterministicEngine(), max_in_flight=6)
    small_worker = _worker(small, service_urls, DeterministicEngine(), max_in_flight=6)
    assert small_worker.consumer._shards[2].keys.jobs_stream == f"{shard_tag(sharded.key_prefix, 2)}:model:small:jobs"
    every = [job_id for per_model in ids.values() for batch in per_model.values() for job_id in batch]
    await default_worker.start()
    await small_worker.start()
    try:
        await _until(lambda: _statuses(pg, every) == dict.fromkeys(every, "succeeded"), what="every job's row")
        models = dict(pg.execute("SELECT id::text, model FROM jobs WHERE id = ANY(%s::uuid[])", (every,)).fetchall())
        shards = _keys(sharded).shards
        lanes = [*shards, *(keys.for_model("small") for keys in shards)]
        await _until(lambda: all(_pending(raw, keys) == 0 for keys in lanes), what="every lane's acks")
    finally:
        await small_worker.stop(grace_seconds=5)
        await default_worker.stop(grace_seconds=5)
    assert {models[job_id] for batch in ids["small"].values() for job_id in batch} == {"small"}
    assert "small" not in {models[job_id] for batch in ids["default"].values() for job_id in batch}
    for keys in shards:
        events = {fields["id"] for _, fields in raw.xrange(keys.events_stream)}
        assert events == {*ids["default"][keys.shard], *ids["small"][keys.shard]}  # both models, on their shard
