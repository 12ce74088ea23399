"""The producer on three Redis shards: of the embedded single server, and of a real Redis Cluster.

Each shard has its own hash tag, so a job written to the wrong shard's keys is invisible to these
checks: they read every shard's lanes, records and sets by name. On the cluster (the
``cluster_settings`` fixture: 3 primaries with a replica each; skipped where this checkout has none)
a script naming another shard's key, or a multi-key command over two shards, fails ``CROSSSLOT``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest
import redis
import redis.asyncio as aioredis

import producer.async_client
from api import event_feed
from api.event_feed import EventFeed, FeedItem, valid_cursor
from broker.keys import RedisKeys
from broker.queued_limit import QueuedJobLimit, TooManyQueuedJobsError
from broker.redis_client import is_cluster, open_redis
from broker.standalone_jobs import note_standalone, unfinished_standalone
from contract.errors import IdempotencyShardError, JobNotFoundError, SubmitNotReplicatedError
from contract.ids import key_shard, new_job_id_on_shard, shard_of
from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from producer.async_client import AsyncClient
from producer.requests import prepare

pytestmark = pytest.mark.timeout(120)
SHARDS = 3
JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}


@pytest.fixture(params=["single", "cluster"])
def sharded(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """Three shards: on the one embedded server, or on the test Redis Cluster (one shard per primary)."""
    if request.param == "single":
        return settings.model_copy(update={"redis_shards": SHARDS})
    try:
        cluster: Settings = request.getfixturevalue("cluster_settings")
    except pytest.FixtureLookupError:
        pytest.skip("no cluster_settings fixture: the local Redis Cluster is not set up in this checkout")
    # RQ (runs and documents only) needs a single server; these tests queue jobs alone.
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(producer.async_client, "open_rq_connection", lambda url: redis.Redis(), raising=False)
    return cluster.model_copy(update={"redis_shards": SHARDS})


@pytest.fixture
async def client(sharded: Settings) -> AsyncIterator[AsyncClient]:
    """An asyncio client of the sharded deployment."""
    async with AsyncClient(sharded) as c:
        yield c


@pytest.fixture
async def raw(sharded: Settings) -> AsyncIterator[aioredis.Redis]:
    """A client of the same server or cluster, for reading each shard's keys by name."""
    assert sharded.redis_url
    connection = open_redis(sharded.redis_url)
    yield connection
    await connection.aclose()


async def _lane_lengths(raw: aioredis.Redis, keys: RedisKeys) -> list[int]:
    return [int(await raw.xlen(shard.jobs_stream)) for shard in keys.shards]


async def test_jobs_land_on_their_shards_and_are_found_and_cancelled_there(
    client: AsyncClient, raw: aioredis.Redis
) -> None:
    keys = client.keys
    ids = await client.submit_many([JOB] * 30)
    assert all(uuid.UUID(job_id).version == 7 for job_id in ids)
    lengths = await _lane_lengths(raw, keys)
    assert sum(lengths) == 30 and all(length > 0 for length in lengths), lengths
    for job_id in ids:  # each record on its job's shard, and only there
        shard = shard_of(job_id, SHARDS)
        assert [bool(await raw.exists(s.state(job_id))) for s in keys.shards] == [n == shard for n in range(SHARDS)]
    assert shard_of(ids[0], SHARDS) == keys.shard_of(ids[0])
    # One lookup and many, by id, each on its shard.
    assert (await client.get(ids[0])).status is JobStatus.QUEUED
    assert {job.id for job in await client._read_jobs(ids, None)} == set(ids)
    # Cancels find them: one, then many.
    on_shard_2 = next(job_id for job_id in ids if shard_of(job_id, SHARDS) == 2)
    assert (await client.cancel(on_shard_2)).status is JobStatus.CANCELLED
    await client.cancel_many(ids)
    for job_id in ids:
        assert await raw.hget(keys.for_job(job_id).state(job_id), "status") == "cancelled"
    with pytest.raises(JobNotFoundError):
        await client.get(str(uuid.uuid4()))


async def test_an_idempotency_key_places_every_retry_on_its_shard(client: AsyncClient, raw: aioredis.Redis) -> None:
    keys = client.keys
    # Fresh ids each time (a retry after a timeout): the key's shard, so the second finds the first's key.
    first = await client.submit(TranslationRequest(**JOB, idempotency_key="order-17"))
    again = await client.submit(TranslationRequest(**JOB, idempotency_key="order-17"))
    assert again == first and sum(await _lane_lengths(raw, keys)) == 1
    assert shard_of(first, SHARDS) == key_shard("order-17", None, SHARDS)
    # A tenant's key lives in its own namespace, placed by tenant and key.
    mine = await client.submit(TranslationRequest(**JOB, idempotency_key="order-17"), tenant="acme")
    assert mine != first and await client.submitter.write([prepare(client.settings, _keyed("order-17"), tenant="acme")])
    assert shard_of(mine, SHARDS) == key_shard("order-17", "acme", SHARDS)
    assert sum(await _lane_lengths(raw, keys)) == 2
    # Many keys over many shards, submitted twice: no job twice.
    items = [{**JOB, "idempotency_key": f"line-{n}"} for n in range(12)]
    assert await client.submit_many(items) == await client.submit_many(items)
    assert sum(await _lane_lengths(raw, keys)) == 14


async def test_a_chosen_id_off_its_keys_shard_is_refused_before_anything_is_written(
    client: AsyncClient, raw: aioredis.Redis
) -> None:
    spec, key = prepare(client.settings, _keyed("order-9"))
    elsewhere = (key_shard("order-9", None, SHARDS) + 1) % SHARDS
    moved = msgspec.structs.replace(spec, job_id=new_job_id_on_shard(elsewhere, SHARDS))
    fine = prepare(client.settings, TranslationRequest(**JOB))
    with pytest.raises(IdempotencyShardError, match="different Redis shards"):
        await client.submitter.write([fine, (moved, key)])
    assert sum(await _lane_lengths(raw, client.keys)) == 0  # not even the valid job before it


async def test_the_tenant_limit_counts_every_shard(client: AsyncClient, raw: aioredis.Redis) -> None:
    keys, settings = client.keys, client.settings
    limit = QueuedJobLimit(client.redis, keys, settings.state_ttl_seconds)
    queued = await client.submit_many([JOB] * 9, tenant="acme")
    per_shard = [int(await raw.zcard(shard.tenant_queued("acme"))) for shard in keys.shards]
    assert sum(per_shard) == 9 and sum(1 for n in per_shard if n) >= 2, per_shard  # the sets are per shard
    assert await limit.count("acme") == 9
    # Named jobs on every shard: admitted only while the sum stays within the limit.
    prepared = [prepare(settings, TranslationRequest(**JOB), tenant="acme") for _ in range(6)]
    assert len({shard_of(spec.job_id, SHARDS) for spec, _ in prepared}) > 1
    with pytest.raises(TooManyQueuedJobsError, match="9 unfinished jobs"):
        await limit.admit_jobs("acme", 14, prepared)
    reservation = await limit.admit_jobs("acme", 15, prepared)
    assert await limit.count("acme") == 15  # those of other shards are held by the home shard's token
    with pytest.raises(TooManyQueuedJobsError):
        await limit.admit_jobs("acme", 15, [prepare(settings, TranslationRequest(**JOB), tenant="acme")])
    await client.submitter.write(prepared)
    await reservation.release([])  # queued: the token goes, each job stays counted on its own shard
    assert await limit.count("acme") == 15
    assert not await raw.exists(limit._script.home("acme").tenant_reservations("acme"))
    # A reserved number, claimed by id on every shard, stays counted exactly once.
    async with limit.reserved("acme", 20, 4) as run:
        assert await limit.count("acme") == 19
        with pytest.raises(TooManyQueuedJobsError):
            await limit.reserve("acme", 20, 2)
        specs = [prepare(settings, TranslationRequest(**JOB), tenant="acme")[0] for _ in range(4)]
        await run.claim([spec.job_id for spec in specs])
        assert await limit.count("acme") == 19
        await client.submitter.submit_specs(specs)
    assert await limit.count("acme") == 19
    assert len(queued) == 9


async def test_concurrent_admissions_over_shards_never_pass_the_limit_together(client: AsyncClient) -> None:
    """Ten submissions of five jobs (spread over the shards) race for a limit of five: exactly one gets in."""
    limit = QueuedJobLimit(client.redis, client.keys, client.settings.state_ttl_seconds)
    batches = [
        [prepare(client.settings, TranslationRequest(**JOB), tenant="acme") for _ in range(5)] for _ in range(10)
    ]
    outcomes = await asyncio.gather(*(limit.admit_jobs("acme", 5, jobs) for jobs in batches), return_exceptions=True)
    admitted = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    assert len(admitted) == 1, outcomes
    assert all(isinstance(outcome, TooManyQueuedJobsError) for outcome in outcomes if outcome not in admitted)
    assert await limit.count("acme") == 5


async def test_the_history_merges_every_shards_unfinished_standalone_jobs(
    client: AsyncClient, raw: aioredis.Redis
) -> None:
    keys = client.keys
    ids = await client.submit_many([JOB] * 12, tenant="acme")
    noted = [int(await raw.zcard(shard.tenant_standalone("acme"))) for shard in keys.shards]
    assert sum(noted) == 12 and all(noted), noted
    found = await unfinished_standalone(client.redis, keys, "acme", None, 5)
    created = {job.id: job.created_at.timestamp() for job in await client._read_jobs(ids, None)}
    newest = sorted(ids, key=lambda job_id: (created[job_id], job_id), reverse=True)[:5]
    assert [job_id for job_id, _ in found] == newest
    assert len(await unfinished_standalone(client.redis, keys, "acme", None, 50)) == 12
    # A noted job whose shard's unfinished-jobs set no longer has it is dropped from that shard's set.
    gone = ids[0]
    await raw.zrem(keys.for_job(gone).tenant_queued("acme"), gone)
    assert gone not in [job_id for job_id, _ in await unfinished_standalone(client.redis, keys, "acme", None, 50)]
    assert await raw.zscore(keys.for_job(gone).tenant_standalone("acme"), gone) is None
    await note_standalone(client.redis, keys, [], 60)  # nothing to note: no round trip, no error


async def _next_event(stream: AsyncIterator[FeedItem]) -> FeedItem:
    """The stream's next event, past any keep-alive."""
    while (item := await anext(stream)).kind == "keepalive":
        pass
    return item


async def test_the_event_feed_follows_every_shards_stream(
    sharded: Settings, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Closing a stream waits for its reads still blocking (redis-py 8.1 lets one that is cancelled while it
    # connects run to its end): 1 s blocks, not the API's 15 s, so the two closes here cost no more than that.
    monkeypatch.setattr(event_feed, "BLOCK_MS", 1000)
    keys = RedisKeys.from_settings(sharded)
    assert sharded.redis_url
    feed = EventFeed(sharded.redis_url, keys, max_streams=2)
    try:
        await raw.xadd(keys.for_shard(1).tenant_events("acme"), {"id": "x", "tenant": "acme", "payload": "{}"})
        start = await feed.start_id("acme", None)
        assert len(start.split(",")) == SHARDS and valid_cursor(start, SHARDS) and feed.valid_cursor(start)
        assert not valid_cursor("1-0,2-0", SHARDS)  # neither one id nor one per shard
        stream = feed.follow("acme", start, job_ids=frozenset(), group_ids=frozenset(), api_key_id="k")
        first = asyncio.ensure_future(_next_event(stream))
        await asyncio.sleep(0.2)  # every shard's read is blocking now
        await raw.xadd(keys.for_shard(0).tenant_events("globex"), {"id": "other", "tenant": "globex", "payload": "{}"})
        on_2 = await raw.xadd(
            keys.for_shard(2).tenant_events("acme"), {"id": "j2", "tenant": "acme", "payload": '{"a":1}'}
        )
        item = await first
        assert item.kind == "event" and '"a":1' in item.data
        assert item.entry_id.split(",")[2] == on_2  # the position on shard 2 moved to the event
        on_0 = await raw.xadd(keys.for_shard(0).tenant_events("acme"), {"id": "j0", "tenant": "acme", "payload": "{}"})
        assert (await _next_event(stream)).entry_id.split(",")[0] == on_0
        await stream.aclose()  # cancels the reads still blocking on the other shards
        # Resuming from an event's id gives what came after it, on any shard.
        resumed = feed.follow("acme", item.entry_id, job_ids=frozenset(), group_ids=frozenset(), api_key_id="k")
        again = await _next_event(resumed)
        assert again.kind == "event" and again.entry_id.split(",")[0] == on_0
        await resumed.aclose()
    finally:
        await feed.close()


async def test_wait_on_submit(sharded: Settings, raw: aioredis.Redis) -> None:
    """No WAIT by default; with replicas asked for, WAIT on each primary written, and a typed error when too few
    replicas confirm (the single server has none; each primary of the test cluster has one)."""
    single = not is_cluster(raw)

    async def waits() -> int:
        stats = await raw.info("commandstats")
        return int(stats.get("cmdstat_wait", {}).get("calls", 0))

    before = await waits() if single else 0
    async with AsyncClient(sharded) as plain:  # default: no WAIT sent
        await plain.submit_many([JOB] * 4)
    if single:
        assert await waits() == before
    else:  # one replica per primary: WAIT 1 is answered as soon as it holds the jobs
        replicated = sharded.model_copy(update={"submit_wait_replicas": 1, "submit_wait_timeout_ms": 5_000})
        async with AsyncClient(replicated) as waiting:
            assert len(await waiting.submit_many([JOB] * 30)) == 30
    too_many = 1 if single else 2
    unreplicated = sharded.model_copy(update={"submit_wait_replicas": too_many, "submit_wait_timeout_ms": 50})
    async with AsyncClient(unreplicated) as waiting:
        started = time.monotonic()
        with pytest.raises(SubmitNotReplicatedError, match="ARE queued on the Redis primary") as raised:
            await waiting.submit_many([JOB] * 4)
        assert time.monotonic() - started < 5
        assert len(raised.value.job_ids) == 4
        for job_id in raised.value.job_ids:  # queued all the same: a worker will run them
            assert (await waiting.get(job_id)).status is JobStatus.QUEUED
    if single:
        assert await waits() == before + 1  # one pipeline, one connection: one WAIT


def _keyed(key: str) -> TranslationRequest:
    return TranslationRequest(**JOB, idempotency_key=key)
