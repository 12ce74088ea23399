"""A replay of ``GET /v1/events`` reads the tenant's own events, bounded by its own retention (issue 48 item 7).

Before, the feed read the shared events stream and dropped other tenants' entries as it went: a
replay from ``0-0`` re-read the whole stream (every tenant's, up to ``DRAGOMAN_EVENTS_MAXLEN``) on
every reconnect. Now FINISH appends a job's event to its tenant's own stream too, trimmed by the
tenant's retention, and the feed reads only that: here, on a real Redis server with the real FINISH
script, another tenant's 5,000 events change neither what one tenant's replay reads nor how much.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from api import event_feed
from api.event_feed import EventFeed, FeedItem
from broker.events import Entries
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from broker.scripts import FinishedJob, FinishScript, TenantEventRetention
from contract.schemas import JobStatus
from contract.settings import Settings
from contract.wire import JobEvent

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def redis_client(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    """A client of the test's Redis server."""
    client = open_redis(settings.redis_url or "")
    yield client
    await client.aclose()


async def finish(
    redis_client: aioredis.Redis,
    keys: RedisKeys,
    tenant: str,
    count: int,
    retention: TenantEventRetention | None = None,
    now: float | None = None,
) -> list[str]:
    """``count`` jobs of ``tenant`` finished through FINISH (no entries to acknowledge), 500 a call; their ids."""
    script = FinishScript(keys, 60, 100_000, retention)
    ids = [str(uuid.uuid4()) for _ in range(count)]
    for start in range(0, count, 500):
        jobs = [
            FinishedJob(JobEvent(job_id=job_id, status=JobStatus.SUCCEEDED, finished_at=time.time()), None, tenant)
            for job_id in ids[start : start + 500]
        ]
        await script.call(redis_client, [], jobs, time.time() if now is None else now)
    return ids


class ReadCounter:
    """Counts the entries the feed reads from Redis (every read of every shard), whichever tenant they are."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries = 0
        read = event_feed.read_events

        async def counted(*args: object, **kwargs: object) -> Entries:
            entries = await read(*args, **kwargs)  # type: ignore[arg-type]
            self.entries += len(entries)
            return entries

        monkeypatch.setattr(event_feed, "read_events", counted)


async def replay(feed: EventFeed, tenant: str, count: int) -> list[FeedItem]:
    """The first ``count`` events of ``tenant``'s replay from ``0-0``."""
    items: list[FeedItem] = []
    stream = feed.follow(tenant, "0-0", job_ids=frozenset(), group_ids=frozenset(), api_key_id="k")
    async for item in stream:
        if item.kind == "event":
            items.append(item)
            if len(items) == count:
                break
    await stream.aclose()
    return items


async def test_another_tenants_volume_changes_neither_what_nor_how_much_a_replay_reads(
    settings: Settings, redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme's 5 events, replayed from 0-0 before and after globex's 5,000: the same 5, and 5 entries read each time
    (before: the whole shared stream, 5,005 entries, for the same 5)."""
    monkeypatch.setattr(event_feed, "BLOCK_MS", 200)
    keys = RedisKeys.from_settings(settings)
    feed = EventFeed(settings.redis_url or "", keys, max_streams=2)
    counter = ReadCounter(monkeypatch)
    try:
        mine = await finish(redis_client, keys, "acme", 5)
        alone = await replay(feed, "acme", 5)
        read_alone = counter.entries
        await finish(redis_client, keys, "globex", 5_000)
        counter.entries = 0
        beside = await replay(feed, "acme", 5)
        read_beside = counter.entries
    finally:
        await feed.close()
    assert [item.data for item in beside] == [item.data for item in alone]
    assert [item.entry_id for item in beside] == [item.entry_id for item in alone]
    assert all(job_id in item.data for job_id, item in zip(mine, alone, strict=True))
    assert read_alone == read_beside == 5
    assert await redis_client.xlen(keys.events_stream) == 5_005  # the shared stream still has every event


async def test_a_tenants_stream_is_trimmed_by_its_own_count_and_nobody_elses(
    settings: Settings, redis_client: aioredis.Redis
) -> None:
    """A retention of 100 events: acme's 2,000 leave about 100 in its stream (Redis trims whole nodes), globex's
    10 stay whole: one tenant's volume never pushes another's events out."""
    keys = RedisKeys.from_settings(settings)
    retention = TenantEventRetention(maxlen=100, seconds=3_600)
    theirs = await finish(redis_client, keys, "globex", 10, retention)
    await finish(redis_client, keys, "acme", 2_000, retention)
    assert 100 <= await redis_client.xlen(keys.tenant_events("acme")) < 300
    kept = await redis_client.xrange(keys.tenant_events("globex"))
    assert [fields["id"] for _, fields in kept] == theirs


async def test_a_tenants_stream_is_trimmed_by_age_and_expires_when_quiet(
    settings: Settings, redis_client: aioredis.Redis
) -> None:
    """Events older than the retention (by the clock FINISH is given) are trimmed when the tenant's next jobs
    finish, and the stream of a tenant whose jobs stop finishing expires after the retention."""
    keys = RedisKeys.from_settings(settings)
    retention = TenantEventRetention(maxlen=10_000, seconds=600)
    await finish(redis_client, keys, "acme", 20, retention)
    assert await redis_client.xlen(keys.tenant_events("acme")) == 20
    assert 0 < await redis_client.pttl(keys.tenant_events("acme")) <= 600_000
    # An hour later (as the writer tells FINISH), everything written before is older than ten minutes.
    await finish(redis_client, keys, "acme", 1, retention, now=time.time() + 3_600)
    assert await redis_client.xlen(keys.tenant_events("acme")) == 0
    await finish(redis_client, keys, "globex", 3, retention, now=time.time() + 3_600)
    assert await redis_client.xlen(keys.events_stream) == 24  # the shared stream is trimmed by its own length only
