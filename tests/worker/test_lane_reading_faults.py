"""Reading two lanes: what the reader must never do when Redis races it or fails half-way.

Each case runs a real worker against real Redis Streams and PostgreSQL (deterministic engine);
the race or the failure is forced by wrapping one Redis call.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError

import worker.consumer as consumer_module
import worker.reclaim as reclaim_module
from broker.keys import RedisKeys
from contract.schemas import JobSpec, Lane, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.profiles import IdentityProfile
from worker.translator import Translator

from .conftest import identity_worker, wait_all


async def test_a_blocking_read_both_lanes_answer_never_brings_more_entries_than_slots(
    settings: Settings, service_urls: ServiceUrls, client: Client
) -> None:
    """COUNT applies per stream: both lanes answering one blocking read used to bring 2x the slots to a
    reader holding them all, which then waited for itself for ever."""
    engine = DeterministicEngine(delay_s=0.3)
    worker = identity_worker(settings, service_urls, engine, max_in_flight=2)
    original = worker.consumer._redis.xreadgroup
    ids: list[str] = []

    async def racing_xreadgroup(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("block") and not ids:  # jobs land in both lanes just before the blocking read
            jobs = [TranslationRequest(f"i{i}", "en", "fr") for i in range(2)]
            jobs += [TranslationRequest(f"b{i}", "en", "fr", lane="bulk") for i in range(2)]
            ids.extend(await asyncio.to_thread(client.submit_many, jobs))
        return await original(*args, **kwargs)

    worker.consumer._redis.xreadgroup = racing_xreadgroup  # type: ignore[method-assign]
    await worker.start()
    try:
        while not ids:
            await asyncio.sleep(0.01)
        jobs = await wait_all(client, ids)
    finally:
        await worker.stop(grace_seconds=1)
    assert {job.status.value for job in jobs} == {"succeeded"}
    assert engine.peak_in_flight <= 2  # the bound held
    assert worker.consumer._slots._value == 2  # and, stopped, every slot is back once: none was made up


async def test_entries_read_before_a_redis_error_still_run(
    settings: Settings, service_urls: ServiceUrls, client: Client
) -> None:
    """They are pending under a live consumer: dropped, nobody would run them before the visibility timeout."""
    worker = identity_worker(settings, service_urls, DeterministicEngine(), max_in_flight=5)
    ids = client.submit_many([TranslationRequest(f"i{i}", "en", "fr") for i in range(8)])
    original = worker.consumer._read_lanes
    calls: list[dict[Lane, int]] = []

    async def fails_on_the_second_read(shard: Any, counts: dict[Lane, int]) -> Any:
        calls.append(dict(counts))
        if len(calls) == 2:
            raise RedisConnectionError("connection reset (simulated)")
        return await original(shard, counts)

    worker.consumer._read_lanes = fails_on_the_second_read  # type: ignore[method-assign]
    await worker.start()
    try:
        jobs = await wait_all(client, ids)  # the visibility timeout is 300 s
    finally:
        await worker.stop(grace_seconds=1)
    assert len(calls) >= 2 and {job.status.value for job in jobs} == {"succeeded"}


async def test_orphans_claimed_before_a_redis_error_in_the_next_lane_still_run(
    settings: Settings,
    service_urls: ServiceUrls,
    client: Client,
    raw_redis: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("worker.consumer.HEARTBEAT_TTL_S", 0)
    settings = settings.model_copy(update={"visibility_timeout_seconds": 300, "reclaim_interval_seconds": 0.1})
    keys = client.keys
    worker = identity_worker(settings, service_urls, DeterministicEngine(), max_in_flight=8)
    await worker.consumer.ensure_group()
    ids = client.submit_many([TranslationRequest(f"i{i}", "en", "fr") for i in range(3)])
    raw_redis.xreadgroup(keys.consumer_group, "ghost", {keys.jobs_stream: ">"}, count=10)  # a dead consumer's
    original = consumer_module.claim_orphans
    failed: list[bool] = []

    async def fails_once_in_the_bulk_lane(*args: Any) -> Any:
        if args[-1] == keys.bulk_jobs_stream and not failed:
            failed.append(True)
            raise RedisConnectionError("connection reset (simulated, bulk lane)")
        return await original(*args)

    monkeypatch.setattr(consumer_module, "claim_orphans", fails_once_in_the_bulk_lane)
    await worker.start()
    try:
        jobs = await wait_all(client, ids)
    finally:
        await worker.stop(grace_seconds=1)
    assert failed and {job.status.value for job in jobs} == {"succeeded"}


async def test_one_lanes_refused_trim_keeps_neither_lane_from_its_keep_alive(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = RedisKeys.from_settings(settings)
    kept: list[str | None] = []
    trimmed: list[str | None] = []

    async def keep_alive(*args: Any) -> list[str]:
        kept.append(args[-1])
        return []

    async def forget(*args: Any) -> list[str]:
        return []

    async def trim(redis: Any, keys_: Any, stream: str | None = None) -> int:
        trimmed.append(stream)
        if stream == keys.jobs_stream:
            raise NoPermissionError("NOPERM this user has no permissions to run the 'xtrim' command")
        return 0

    monkeypatch.setattr(reclaim_module, "keep_alive", keep_alive)
    monkeypatch.setattr(reclaim_module, "forget_gone_consumers", forget)
    monkeypatch.setattr(reclaim_module, "trim_acknowledged", trim)
    housekeeper = reclaim_module.Housekeeper(settings, None, "me", lambda: [(0, Lane.BULK, "1-0")])  # type: ignore[arg-type]
    await housekeeper.tick()
    assert kept == [keys.jobs_stream, keys.bulk_jobs_stream]
    assert trimmed == [keys.jobs_stream, keys.bulk_jobs_stream]  # the bulk lane is trimmed all the same


async def test_every_engine_request_carries_its_jobs_lane() -> None:
    engine = DeterministicEngine()
    seen: list[int] = []
    generate = engine.generate

    async def spy(request: GenerationRequest) -> GenerationResult:
        seen.append(request.priority)
        return await generate(request)

    engine.generate = spy  # type: ignore[method-assign]
    translator = Translator(engine, IdentityProfile(engine.tokenizer), 256, 2.0, max_piece_chars=200)
    short = JobSpec(job_id=str(uuid.uuid4()), text="Hello there.", source_lang="en", target_lang="fr", created_at=0)
    await translator.translate(short, "r1")  # one piece: the common case
    long = " ".join(f"Sentence number {i} is here." for i in range(40))
    await translator.translate(
        JobSpec(
            job_id=str(uuid.uuid4()),
            text=long,
            source_lang="en",
            target_lang="fr",
            created_at=0,
            lane=Lane.BULK,
        ),
        "r2",
    )
    bulk_short = JobSpec(
        job_id=str(uuid.uuid4()), text="Hi.", source_lang="en", target_lang="fr", created_at=0, run_id=str(uuid.uuid4())
    )
    await translator.translate(bulk_short, "r3")
    assert seen[0] == 0  # interactive
    assert len(seen) > 3 and set(seen[1:-1]) == {1}  # every piece of the long bulk text
    assert seen[-1] == 1  # a run's job is bulk without saying so
