"""The HTTP API on three Redis shards of the embedded server: idempotency, the queued-job limit, the history
listing and the events feed, each over every shard (no worker: what the producer side writes and reads)."""

from __future__ import annotations

import httpx
import pytest
import redis

from broker.keys import RedisKeys
from contract.ids import shard_of
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_events import read_events

pytestmark = pytest.mark.timeout(300)
SHARDS = 3
JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """This module's deployment: three shards."""
    return settings.model_copy(update={"redis_shards": SHARDS})


async def test_jobs_keys_limit_and_history_over_three_shards(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    keys = RedisKeys.from_settings(settings)
    key = tenant_key("acme", max_queued_jobs=7)
    items = [{**JOB, "idempotency_key": f"line-{n}"} for n in range(6)]
    first = await http.post("/v1/jobs", json=items, headers=bearer(key))
    assert first.status_code == 202, first.text
    ids = first.json()["ids"]
    assert len({shard_of(job_id, SHARDS) for job_id in ids}) > 1
    # Retried: the same jobs, from each key's shard; nothing queued twice, nothing counted twice.
    assert (await http.post("/v1/jobs", json=items, headers=bearer(key))).json()["ids"] == ids
    assert sum(int(raw_redis.xlen(shard.jobs_stream)) for shard in keys.shards) == 6
    # 6 on their shards + 2 more passes 7: refused, though no one shard holds more than a few.
    refused = await http.post("/v1/jobs", json=[JOB, JOB], headers=bearer(key))
    assert refused.status_code == 429 and "6 unfinished jobs" in refused.text
    assert (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).status_code == 202
    # Looked up and listed from every shard.
    assert (await http.get(f"/v1/jobs/{ids[-1]}", headers=bearer(key))).json()["status"] == "queued"
    listed = (await http.get("/v1/jobs?limit=50", headers=bearer(key))).json()["data"]
    assert len(listed) == 7 and set(ids) <= {job["id"] for job in listed}
    assert (await http.post(f"/v1/jobs/{ids[0]}/cancel", headers=bearer(key))).json()["status"] == "cancelled"


async def test_the_events_feed_reads_every_shard(
    api_url: str, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    keys = RedisKeys.from_settings(settings)
    key = tenant_key("acme")
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:  # the tenant's name, as its jobs carry it
        job_id = (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).json()["id"]
        tenant = raw_redis.hget(keys.for_job(job_id).state(job_id), "tenant")
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:
        wrong = await http.get("/v1/events", headers={**bearer(key), "Last-Event-ID": "1-0,2-0"})
        assert wrong.status_code == 400  # neither one id nor one per shard
        async with http.stream("GET", "/v1/events", headers=bearer(key)) as stream:
            assert stream.status_code == 200  # answered once its start (each shard's newest entry) is taken
            entry = {"id": "j", "tenant": str(tenant), "payload": '{"job_id": "j"}'}
            on_2 = raw_redis.xadd(keys.for_shard(2).tenant_events(str(tenant)), entry)
            [event] = await read_events(stream, 1)
        assert event["data"]["job_id"] == "j" and event["id"].split(",")[2] == on_2
        # Resumed with that id: an event written later on shard 1 comes, the one on shard 2 does not again.
        on_1 = raw_redis.xadd(keys.for_shard(1).tenant_events(str(tenant)), {**entry, "payload": '{"job_id": "k"}'})
        resumed = {**bearer(key), "Last-Event-ID": event["id"]}
        async with http.stream("GET", "/v1/events", headers=resumed) as stream:
            [again] = await read_events(stream, 1)
        assert again["data"]["job_id"] == "k" and again["id"].split(",")[1] == on_1
