"""Quality flags through the worker: stored on the row, counted on /metrics, switched off, and the retry policy."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from contract.errors import ConfigurationError
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from tests.worker.conftest import WorkerFactory, identity_worker, wait_all
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest

SOURCE = "The file could not be opened because the disk is full."
FRENCH = "Le fichier n'a pas pu être ouvert car le disque est plein."


def translate(text: str, _: GenerationRequest) -> str:
    """A correct translation of SOURCE; anything else echoed."""
    return FRENCH if text == SOURCE else text


def _metric(worker: Any, name: str, labels: dict[str, str] | None = None) -> float:
    value = worker.metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else float(value)


async def test_each_translation_is_checked_and_its_flags_stored_and_counted(
    client: Client, start_worker: WorkerFactory
) -> None:
    engine = DeterministicEngine(rewrite=translate)
    good = client.submit(SOURCE, "en", "fr")
    copied = client.submit("Please restart the computer before installing the update.", "en", "fr")
    async with start_worker(engine) as worker:
        clean, flagged = await wait_all(client, [good, copied])
        assert clean.quality_flags == {}
        assert flagged.quality_flags is not None
        assert set(flagged.quality_flags) == {"untranslated", "wrong_language"}
        assert flagged.quality_flags["untranslated"] == "the output is the source's own words (8 of 8, 100%)"
        assert _metric(worker, "dragoman_quality_checked_total") == 2
        assert _metric(worker, "dragoman_quality_flags_total", {"flag": "untranslated"}) == 1
        assert _metric(worker, "dragoman_quality_flags_total", {"flag": "numbers"}) == 0


async def test_checks_switched_off_leave_the_row_unchecked(
    client: Client, settings: Settings, start_worker: WorkerFactory
) -> None:
    job = client.submit("Please restart the computer before installing the update.", "en", "fr")
    off = settings.model_copy(update={"quality_checks": False})
    async with start_worker(DeterministicEngine(), settings_=off) as worker:
        (done,) = await wait_all(client, [job])
        assert done.quality_flags is None
        assert _metric(worker, "dragoman_quality_checked_total") == 0


async def test_a_job_flagged_with_a_chosen_flag_is_retried_with_sampling_and_the_better_kept(
    client: Client, settings: Settings, start_worker: WorkerFactory
) -> None:
    temperatures: list[float] = []

    def copy_when_greedy(text: str, request: GenerationRequest) -> str:
        temperatures.append(request.temperature)
        return text if request.temperature == 0 else translate(text, request)

    retrying = settings.model_copy(update={"retry_on_flags": "untranslated, numbers"})
    job = client.submit(SOURCE, "en", "fr")
    async with start_worker(DeterministicEngine(rewrite=copy_when_greedy), settings_=retrying) as worker:
        (done,) = await wait_all(client, [job])
        assert done.translation == FRENCH
        assert done.quality_flags == {}
        assert done.attempts == 2
        assert temperatures[0] == 0 and temperatures[1] > 0
        source_tokens = len(SOURCE.encode()) // 4
        assert done.output_tokens is not None and done.output_tokens > source_tokens + len(FRENCH.encode()) // 4 - 2
        assert _metric(worker, "dragoman_quality_retries_total", {"outcome": "better"}) == 1


async def test_a_retry_that_does_no_better_keeps_the_first_and_says_so(
    client: Client, settings: Settings, start_worker: WorkerFactory
) -> None:
    retrying = settings.model_copy(update={"retry_on_flags": "untranslated"})
    text = "Please restart the computer before installing the update."
    job = client.submit(text, "en", "fr")
    numbers_only = client.submit("Room 42 is free until noon.", "en", "fr")  # flagged, not with a chosen flag

    def drop_the_number(source: str, _: GenerationRequest) -> str:
        return "La salle est libre jusqu'à midi." if source.startswith("Room") else source

    engine = DeterministicEngine(rewrite=drop_the_number)
    async with start_worker(engine, settings_=retrying) as worker:
        done, other = await wait_all(client, [job, numbers_only])
        assert done.translation == text
        assert done.attempts == 2
        assert done.quality_flags is not None
        assert done.quality_flags["untranslated"].endswith("(still so after one retry with sampling)")
        assert not done.quality_flags["wrong_language"].endswith("retry with sampling)")
        assert _metric(worker, "dragoman_quality_retries_total", {"outcome": "not_better"}) == 1
        assert other.attempts == 1
        assert other.quality_flags == {"numbers": "source number 42 missing from the output"}


def test_an_unknown_retry_flag_is_a_configuration_error_naming_the_variable(settings: Settings) -> None:
    bad = settings.model_copy(update={"retry_on_flags": "untranslated,wrong_lang"})
    with pytest.raises(ConfigurationError, match="DRAGOMAN_RETRY_ON_FLAGS: unknown quality flag 'wrong_lang'"):
        _ = bad.retry_flags
    assert settings.retry_flags == frozenset()


async def test_a_memory_hit_is_checked_again_and_a_translation_still_flagged_for_retry_is_not_remembered(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    text = f"Please restart the computer before installing the update {uuid.uuid4().hex[:6]}."
    remembering = settings.model_copy(update={"memory_enabled": True})
    worker = identity_worker(remembering, service_urls, DeterministicEngine())
    await worker.start()
    try:
        [first] = await wait_all(client, [client.submit(text, "en", "fr")])
        for _ in range(200):
            if worker.memory.counters.stored:
                break
            await asyncio.sleep(0.05)
        [again] = await wait_all(client, [client.submit(text, "en", "fr")])
    finally:
        await worker.stop(grace_seconds=5)
    assert again.from_memory and first.quality_flags is not None
    assert again.quality_flags == first.quality_flags and "untranslated" in again.quality_flags

    other = f"Please restart the computer before installing the patch {uuid.uuid4().hex[:6]}."
    retrying = remembering.model_copy(update={"retry_on_flags": "untranslated"})
    worker = identity_worker(retrying, service_urls, DeterministicEngine())
    await worker.start()
    try:
        [flagged] = await wait_all(client, [client.submit(other, "en", "fr")])
        await asyncio.sleep(0.7)  # the memory stores every half second
        assert worker.memory.counters.stored == 0
    finally:
        await worker.stop(grace_seconds=5)
    assert flagged.attempts == 2 and not flagged.from_memory
