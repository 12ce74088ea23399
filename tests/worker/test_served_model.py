"""A worker of a served model: the stream decides a job's model, whatever a plain-XADD producer wrote."""

from __future__ import annotations

import json
import uuid

import redis
import redis.asyncio as aioredis

from broker.dead_letters import DeadLetters
from contract.schemas import JobStatus, Lane
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine

from .conftest import WorkerFactory, wait_all


def _xadd(raw: redis.Redis, stream: str, text: str) -> str:
    job_id = str(uuid.uuid4())
    payload = {"text": text, "source_lang": "en", "target_lang": "fr"}  # no model: a plain producer's entry
    raw.xadd(stream, {"v": "1", "id": job_id, "payload": json.dumps(payload)})
    return job_id


async def test_a_plain_xadd_to_a_model_s_lane_is_that_model_s_job_and_its_dead_letter_goes_back_there(
    settings: Settings,
    client: Client,
    raw_redis: redis.Redis,
    async_redis: aioredis.Redis,
    start_worker: WorkerFactory,
) -> None:
    small = settings.model_copy(update={"served_model_names": ["small"]})
    stream = client.keys.lane(Lane.INTERACTIVE, "small")
    plain, poison = _xadd(raw_redis, stream, "hello"), _xadd(raw_redis, stream, "poison pill")
    async with start_worker(DeterministicEngine(fail_if=lambda prompt: "poison" in prompt), settings_=small):
        done, failed = await wait_all(client, [plain, poison])
    assert done.status is JobStatus.SUCCEEDED and done.model == "small"
    assert failed.status is JobStatus.FAILED
    letters = DeadLetters(async_redis, settings)
    (letter,) = await letters.entries()
    await letters.retry(letter.dead_id)
    # Back to the lane it came from, not the default model's: the worker recorded the stream's model.
    assert [f["id"] for _, f in raw_redis.xrange(stream)][-1] == poison
    assert raw_redis.xlen(client.keys.jobs_stream) == 0
