"""End to end with the real vLLM CPU engine and the default model (Gemma 3 270M).

Slow (the engine takes about a minute to start on a CPU): marked ``e2e``; ``make test`` runs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.engine import EngineOptions
from worker.model import prepare_default_model
from worker.profiles import choose_profile
from worker.service import Worker
from worker.vllm_engine import VllmEngine

from .conftest import wait_all
from .workload import varied_texts

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def engine() -> Iterator[VllmEngine]:
    """The real engine on the default model, with a small context so one test can overflow it."""
    model_path = prepare_default_model(Settings().model_cache_dir)
    engine = VllmEngine.start(model_path, EngineOptions(max_num_seqs=16, max_model_len=1024))
    yield engine
    engine.shutdown()


async def test_twenty_varied_jobs_and_one_too_long(
    engine: VllmEngine,
    settings: Settings,
    service_urls: ServiceUrls,
    client: Client,
    raw_redis: redis.Redis,
    pg: Any,
) -> None:
    texts = varied_texts(20)
    token_counts = [len(engine.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    assert min(token_counts) >= 8 and max(token_counts) <= 220
    too_long = " ".join(texts)[:6000]  # about 1300 tokens: past the 1024-token context, under the limit
    assert len(too_long) < settings.max_text_chars

    ids = client.submit_many(TranslationRequest(t, "en", "fr") for t in texts)
    long_id = client.submit(too_long, "en", "de")
    profile = choose_profile(None, prepare_default_model(settings.model_cache_dir), engine.tokenizer)
    assert profile.name == "few-shot"
    worker = Worker(
        settings,
        redis_url=service_urls.redis_url,
        database_url=service_urls.database_url,
        engine=engine,
        profile=profile,
        max_in_flight=32,
    )
    await worker.start()
    try:
        jobs = await wait_all(client, [*ids, long_id], within=600)
    finally:
        await worker.stop(grace_seconds=30)

    *translated, rejected = jobs
    assert [j.status for j in translated] == [JobStatus.SUCCEEDED] * 20
    for job in translated:
        assert job.translation and job.translation.strip(), job
        assert "\n" not in job.translation
        assert job.model == "gemma-3-270m" and job.output_tokens and job.prompt_tokens
    assert rejected.status is JobStatus.FAILED
    assert rejected.error and "context is 1024 tokens" in rejected.error and "prompt is" in rejected.error

    rows = pg.execute(
        "SELECT count(*) FROM jobs WHERE id = ANY(%s::uuid[]) AND status = 'succeeded' AND translated_text <> ''",
        (ids,),
    ).fetchone()
    assert rows == (20,)
    events = {f["id"]: json.loads(f["payload"]) for _, f in raw_redis.xrange(client.keys.events_stream)}
    assert set(events) == {*ids, long_id}
    assert all(events[i]["status"] == "succeeded" and events[i]["output_tokens"] > 0 for i in ids)
    assert events[long_id]["status"] == "failed" and events[long_id]["error"] == rejected.error
    assert raw_redis.xpending(client.keys.jobs_stream, client.keys.consumer_group)["pending"] == 0
