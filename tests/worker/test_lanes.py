"""The lanes: interactive jobs reach the engine before bulk ones, and bulk keeps its share.

The weighted split is a unit test; the reading order runs a real worker against real Redis
Streams and PostgreSQL, with the deterministic engine.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from contract.schemas import JobStatus, Lane, TranslationRequest
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine
from worker.lanes import LaneShares

from .conftest import WorkerFactory, wait_all


def test_one_slot_at_a_time_still_gives_bulk_its_share() -> None:
    shares = LaneShares(bulk_share=0.2)
    picks = [lane for _ in range(20) for lane, n in shares.split(1).items() if n]
    assert picks.count(Lane.BULK) == 4
    assert picks.count(Lane.INTERACTIVE) == 16
    assert all(picks[i : i + 5].count(Lane.BULK) == 1 for i in range(0, 20, 5))  # spread evenly, not bunched


def test_a_read_of_many_slots_splits_them_by_weight() -> None:
    assert LaneShares(bulk_share=0.25).split(8) == {Lane.INTERACTIVE: 6, Lane.BULK: 2}
    assert LaneShares(bulk_share=0.5).split(3)[Lane.INTERACTIVE] in (1, 2)
    assert LaneShares(bulk_share=0.2).split(0) == {Lane.INTERACTIVE: 0, Lane.BULK: 0}


@pytest.mark.parametrize("share", [0.0, 1.0, -0.1, 1.5])
def test_a_share_that_would_starve_a_lane_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="bulk_share"):
        LaneShares(bulk_share=share)


def test_jobs_are_queued_in_their_lane(client: Client, raw_redis: redis.Redis) -> None:
    plain = client.submit("Hello.", "en", "fr")
    bulk = client.submit("Hello.", "en", "fr", lane="bulk")
    listed = client.submit_many([{"text": "Hi.", "source_lang": "en", "target_lang": "fr", "lane": "bulk"}])
    interactive_ids = [f["id"] for _, f in raw_redis.xrange(client.keys.jobs_stream)]
    bulk_ids = [f["id"] for _, f in raw_redis.xrange(client.keys.bulk_jobs_stream)]
    assert interactive_ids == [plain]
    assert bulk_ids == [bulk, *listed]
    assert client.keys.bulk_jobs_stream == client.keys.jobs_stream + ":bulk"


def test_an_unknown_lane_is_refused_before_anything_is_written(client: Client, raw_redis: redis.Redis) -> None:
    from contract.errors import InvalidJobError

    with pytest.raises(InvalidJobError, match="lane must be one of 'interactive', 'bulk', got 'urgent'"):
        client.submit("Hello.", "en", "fr", lane="urgent")
    assert raw_redis.xlen(client.keys.jobs_stream) == 0
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == 0


def _start_order(pg: Any, ids: list[str]) -> list[str]:
    rows = pg.execute("SELECT id::text FROM jobs WHERE id = ANY(%s::uuid[]) ORDER BY started_at, id", (ids,)).fetchall()
    return [row[0] for row in rows]


async def test_interactive_jobs_start_before_a_bulk_backlog(
    client: Client, raw_redis: redis.Redis, pg: Any, start_worker: WorkerFactory
) -> None:
    bulk = client.submit_many(
        [TranslationRequest(f"bulk {i}", "en", "fr", lane="bulk") for i in range(60)]
    )  # queued first
    interactive = client.submit_many([TranslationRequest(f"interactive {i}", "en", "fr") for i in range(8)])
    async with start_worker(DeterministicEngine(delay_s=0.01), max_in_flight=2):
        jobs = await wait_all(client, bulk + interactive)
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}
    order = _start_order(pg, bulk + interactive)
    last_interactive = max(order.index(job_id) for job_id in interactive)
    assert last_interactive < 8 + 4  # all 8 went first, bulk getting only its fifth meanwhile
    assert raw_redis.xpending(client.keys.bulk_jobs_stream, client.keys.consumer_group)["pending"] == 0
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0


async def test_a_flood_of_interactive_jobs_does_not_starve_bulk(
    client: Client, pg: Any, start_worker: WorkerFactory, settings: Settings
) -> None:
    interactive = client.submit_many([TranslationRequest(f"interactive {i}", "en", "fr") for i in range(80)])
    bulk = client.submit_many([TranslationRequest(f"bulk {i}", "en", "fr", lane="bulk") for i in range(80)])
    async with start_worker(DeterministicEngine(delay_s=0.005), max_in_flight=1):
        await wait_all(client, interactive + bulk)
    first_fifty = _start_order(pg, interactive + bulk)[:50]
    bulk_share = sum(job_id in set(bulk) for job_id in first_fifty) / 50
    assert bulk_share == pytest.approx(settings.bulk_share, abs=0.05)


async def test_a_lane_alone_gets_the_whole_worker(client: Client, start_worker: WorkerFactory) -> None:
    engine = DeterministicEngine(delay_s=0.02)
    bulk = client.submit_many([TranslationRequest(f"bulk {i}", "en", "fr", lane="bulk") for i in range(64)])
    async with start_worker(engine, max_in_flight=8):
        await wait_all(client, bulk)
    assert engine.peak_in_flight == 8


async def test_a_bulk_job_that_fails_for_good_is_retried_into_the_bulk_lane(
    client: Client, raw_redis: redis.Redis, async_redis: aioredis.Redis, start_worker: WorkerFactory
) -> None:
    from broker.dead_letters import DeadLetters

    engine = DeterministicEngine(fail_if=lambda prompt: "poison" in prompt)
    job_id = client.submit("poison pill", "en", "fr", lane="bulk")
    async with start_worker(engine):
        (job,) = await wait_all(client, [job_id])
    assert job.status is JobStatus.FAILED
    letters = DeadLetters(async_redis, client.settings)
    (letter,) = await letters.entries()
    await letters.retry(letter.dead_id)
    assert [f["id"] for _, f in raw_redis.xrange(client.keys.bulk_jobs_stream)][-1] == job_id
    assert job_id not in {f["id"] for _, f in raw_redis.xrange(client.keys.jobs_stream)}


@pytest.mark.parametrize(
    ("value", "decoded"), [("bulk", Lane.BULK), ("interactive", Lane.INTERACTIVE), ("asap", None), (3, None)]
)
@pytest.mark.parametrize("name", ["lane", "priority"])
def test_a_payloads_lane_is_read_when_known_and_ignored_otherwise(
    name: str, value: object, decoded: Lane | None
) -> None:
    """The stream an entry comes from decides its lane: a word this version does not know refuses nothing.

    ``priority``, the lane's old name, is read the same way: entries written before the rename
    (and other languages' producers that still send it) keep their lane.
    """
    import json

    from contract.wire import decode_job_entry

    payload = {"text": "Hi", "source_lang": "en", "target_lang": "fr", name: value}
    fields = {"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}
    spec = decode_job_entry(fields, max_chars=100)
    assert spec.lane is decoded


def test_the_encoder_writes_lane_and_an_entry_written_before_the_rename_is_read() -> None:
    import json

    from contract.schemas import build_job_spec
    from contract.wire import decode_job_entry, encode_job_entry

    fields = encode_job_entry(build_job_spec(str(uuid.uuid4()), "Hi", "en", "fr", max_chars=100, lane="bulk"))
    payload = json.loads(fields["payload"])
    assert payload["lane"] == "bulk" and "priority" not in payload
    written_before = {name: value for name, value in payload.items() if name != "lane"} | {"priority": "bulk"}
    before = {"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(written_before)}
    assert decode_job_entry(before, max_chars=100).lane is Lane.BULK
    both = {"v": "1", "id": fields["id"], "payload": json.dumps({**payload, "priority": "bulk"})}
    assert decode_job_entry(both, max_chars=100).lane is Lane.BULK  # the same lane twice is no conflict


def test_a_payload_whose_lane_and_priority_differ_is_refused() -> None:
    import json

    from contract.errors import MalformedEntryError
    from contract.wire import decode_job_entry

    payload = {"text": "Hi", "source_lang": "en", "target_lang": "fr", "lane": "bulk", "priority": "interactive"}
    fields = {"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}
    with pytest.raises(MalformedEntryError, match=r"lane 'bulk' and priority 'interactive'.*send lane alone"):
        decode_job_entry(fields, max_chars=100)


@pytest.mark.parametrize("own_word", ["asap", 3, {"level": "high"}])
def test_a_priority_that_names_no_lane_beside_a_lane_refuses_nothing(own_word: object) -> None:
    """A producer's own ``priority`` (a word or number of its own, no lane) beside ``lane`` is no conflict:
    a word this version does not know refuses nothing, and only ``lane`` names the lane."""
    import json

    from contract.wire import decode_job_entry

    payload = {"text": "Hi", "source_lang": "en", "target_lang": "fr", "lane": "bulk", "priority": own_word}
    fields = {"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}
    assert decode_job_entry(fields, max_chars=100).lane is Lane.BULK
    payload = {"text": "Hi", "source_lang": "en", "target_lang": "fr", "lane": own_word, "priority": "bulk"}
    fields = {"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}
    assert decode_job_entry(fields, max_chars=100).lane is None  # lane is the field read: its stream decides
