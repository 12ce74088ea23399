"""The quality checks in spawned child processes: flags through the pool, batching, a dead child, shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contract.settings import Settings
from producer.client import Client
from tests.worker.conftest import WorkerFactory, wait_all
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest
from worker.quality_check import CheckInput
from worker.quality_pool import QualityCheckPool

SOURCE = "The file could not be opened because the disk is full."
FRENCH = "Le fichier n'a pas pu être ouvert car le disque est plein."
COPIED = "Please restart the computer before installing the update."


def translate(text: str, _: GenerationRequest) -> str:
    """A correct translation of SOURCE; anything else echoed (flagged untranslated)."""
    return FRENCH if text == SOURCE else text


def _metric(worker: Any, name: str) -> float:
    value = worker.metrics.registry.get_sample_value(name, {})
    return 0.0 if value is None else float(value)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_flags_arrive_through_the_pool_and_a_stop_leaves_no_child(
    client: Client, settings: Settings, start_worker: WorkerFactory
) -> None:
    pooled = settings.model_copy(update={"quality_check_processes": 1})
    ids = [client.submit(SOURCE, "en", "fr"), client.submit(COPIED, "en", "fr")]
    async with start_worker(DeterministicEngine(rewrite=translate), settings_=pooled) as worker:
        pool = worker.consumer.quality_pool
        assert pool is not None
        clean, flagged = await wait_all(client, ids)
        children = pool.process_ids()
        assert len(children) == 1
        assert pool.executor_calls >= 1
        assert clean.quality_flags == {}
        assert flagged.quality_flags is not None
        assert set(flagged.quality_flags) == {"untranslated", "wrong_language"}
    for _ in range(50):
        if not any(_alive(pid) for pid in children):
            break
        await asyncio.sleep(0.1)
    assert not any(_alive(pid) for pid in children)


async def test_no_processes_checks_inline_in_the_worker(
    client: Client, settings: Settings, start_worker: WorkerFactory
) -> None:
    assert settings.quality_check_processes == 0
    job = client.submit(COPIED, "en", "fr")
    async with start_worker(DeterministicEngine(rewrite=translate)) as worker:
        assert worker.consumer.quality_pool is None
        (done,) = await wait_all(client, [job])
        assert done.quality_flags is not None
        assert set(done.quality_flags) == {"untranslated", "wrong_language"}
        assert _metric(worker, "dragoman_quality_check_errors_total") == 0


@pytest.fixture(scope="module")
def errors() -> list[int]:
    return []


@pytest.fixture
async def pool(errors: list[int]) -> AsyncIterator[QualityCheckPool]:
    errors.clear()
    checks = QualityCheckPool(1, 0.5, language_check=True, on_error=errors.append, batch_size=500)
    await checks.start()
    try:
        yield checks
    finally:
        await checks.close()


def _item(source: str, translation: str) -> CheckInput:
    return CheckInput(source, translation, "en", "fr", {}, False)


async def test_many_checks_in_one_loop_iteration_are_one_executor_call_and_a_killed_child_loses_no_job(
    pool: QualityCheckPool, errors: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    # Batching: 200 checks started together cost one executor call.
    items = [_item(SOURCE, FRENCH)] * 100 + [_item(COPIED, COPIED)] * 100
    results = await asyncio.gather(*(pool.check(item) for item in items))
    assert pool.executor_calls == 1
    assert results[0] == {}
    assert results[150] is not None and "untranslated" in results[150]

    # A child killed mid-batch: those checks come back None (not checked), counted; the next batch is checked.
    (child,) = pool.process_ids()
    slow = [_item(SOURCE * 50, FRENCH * 50)] * 3000
    running = asyncio.gather(*(pool.check(item) for item in slow))
    await asyncio.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    lost = await running
    assert all(flags is None for flags in lost)
    assert sum(errors) == 3000
    assert sum("quality check process failed" in record.message for record in caplog.records) == 1
    again = await pool.check(_item(COPIED, COPIED))
    assert again is not None and "untranslated" in again
    assert pool.process_ids() and child not in pool.process_ids()
