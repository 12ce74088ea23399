"""The translation memory in a running worker: repeats served without the engine, twins in flight shared,
nothing stale after a model change, and a memory that cannot be reached costs nothing but speed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import msgspec

from contract.schemas import JobSpec, JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage.memory import MemoryStoreError
from worker.deterministic_engine import DeterministicEngine
from worker.memory import TranslationMemory, memory_key, model_identity
from worker.service import Worker
from worker.translator import Translation

from .conftest import identity_worker, wait_all


def _memory_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"memory_enabled": True})


def _worker(
    settings: Settings, urls: ServiceUrls, engine: DeterministicEngine, model_path: Path | None = None
) -> Worker:
    return identity_worker(settings, urls, engine, model_path=model_path)


async def _stored(worker: Worker, count: int) -> None:
    """Wait until ``count`` translations are in PostgreSQL (they are stored every half second)."""
    for _ in range(200):
        if worker.memory.counters.stored >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"only {worker.memory.counters.stored} of {count} translations stored")


async def test_a_repeat_is_served_from_memory_without_the_engine(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    text = f"A sentence seen twice {uuid.uuid4()}."
    engine = DeterministicEngine()
    worker = _worker(_memory_settings(settings), service_urls, engine)
    await worker.start()
    try:
        [first] = await wait_all(client, [client.submit(text, "en", "fr")])
        await _stored(worker, 1)
        [again, opted_out] = await wait_all(
            client, [client.submit(text, "en", "fr"), client.submit(text, "en", "fr", memory=False)]
        )
    finally:
        await worker.stop(grace_seconds=5)
    assert first.status is JobStatus.SUCCEEDED and not first.from_memory and first.prompt_tokens
    assert again.status is JobStatus.SUCCEEDED and again.from_memory
    assert again.translation == first.translation and again.prompt_tokens is None and again.pieces is None
    assert not opted_out.from_memory and opted_out.translation == first.translation
    assert engine.requests == 2  # the first job and the one that opted out
    assert worker.memory.counters.hits == 1


async def test_identical_jobs_in_flight_share_one_engine_request(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    text = f"Five at once {uuid.uuid4()}."
    engine = DeterministicEngine(delay_s=0.3)
    worker = _worker(_memory_settings(settings), service_urls, engine)
    ids = client.submit_many(TranslationRequest(text, "en", "fr") for _ in range(5))
    other = client.submit(f"Another text {uuid.uuid4()}", "en", "fr")
    await worker.start()
    try:
        jobs = await wait_all(client, [*ids, other])
    finally:
        await worker.stop(grace_seconds=5)
    assert all(job.status is JobStatus.SUCCEEDED and job.translation == text for job in jobs[:5])
    assert engine.requests == 2
    assert sum(job.from_memory for job in jobs[:5]) == 4
    assert worker.memory.counters.shared == 4


async def test_a_changed_model_never_finds_the_old_entries(
    client: Client, settings: Settings, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    text = f"Model-bound text {uuid.uuid4()}."
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, revision in ((old, "1"), (new, "2")):
        folder.mkdir()
        (folder / "config.json").write_text(f'{{"revision": {revision}}}')
    assert model_identity("m", old) != model_identity("m", new)
    for folder in (old, new):
        engine = DeterministicEngine()
        worker = _worker(_memory_settings(settings), service_urls, engine, model_path=folder)
        await worker.start()
        try:
            [job] = await wait_all(client, [client.submit(text, "en", "fr")])
            await _stored(worker, 1)
        finally:
            await worker.stop(grace_seconds=5)
        assert not job.from_memory and engine.requests == 1


async def test_source_language_auto_is_detected_or_failed_at_once(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    engine = DeterministicEngine()
    worker = _worker(settings, service_urls, engine)
    await worker.start()
    try:
        french, digits = await wait_all(
            client,
            [
                client.submit("Bonjour tout le monde, comment allez-vous aujourd'hui ?", "auto", "en"),
                client.submit("12345 67890", "auto", "en"),
            ],
        )
    finally:
        await worker.stop(grace_seconds=5)
    assert french.status is JobStatus.SUCCEEDED
    assert (french.source_lang, french.detected_source_lang) == ("auto", "fr")
    assert digits.status is JobStatus.FAILED and digits.attempts == 1
    assert digits.error and "could not be told with confidence" in digits.error and "source_lang" in digits.error
    assert engine.requests == 1


async def test_an_auto_job_with_source_hints_is_a_best_guess_never_a_failure(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    """Issue 49: a text too short to tell, sent with hints (as the DeepL and LibreTranslate doors send it), is
    translated from the first hint it does not rule out; the same text without hints still fails, as before."""
    engine = DeterministicEngine()
    worker = _worker(settings, service_urls, engine)
    await worker.start()
    try:
        save, greeting, digits, strict = await wait_all(
            client,
            [
                client.submit("Save", "auto", "fr", source_hints=["en"]),
                client.submit("Привет", "auto", "fr", source_hints=["en", "ru"]),  # English ruled out by its script
                client.submit("12345 67890", "auto", "en", source_hints=["de", "en"]),
                client.submit("Save", "auto", "fr"),
            ],
        )
    finally:
        await worker.stop(grace_seconds=5)
    assert [job.status for job in (save, greeting, digits)] == [JobStatus.SUCCEEDED] * 3
    assert [job.detected_source_lang for job in (save, greeting, digits)] == ["en", "ru", "de"]
    assert save.source_lang == "auto"  # the row still says the language was detected
    assert strict.status is JobStatus.FAILED and strict.error and "could not be told with confidence" in strict.error


async def test_a_memory_that_cannot_be_reached_only_costs_the_lookup(settings: Settings) -> None:
    memory = TranslationMemory(
        _memory_settings(settings),
        "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1",
        model_id="m",
        profile_id="p:1",
    )
    spec = JobSpec(job_id=str(uuid.uuid4()), text="Hi", source_lang="en", target_lang="fr", created_at=0.0)
    assert await memory.recall([spec]) == {}
    memory.remember(spec, Translation("Salut", 3, 2, "stop"))
    await memory.flush()  # fails, keeps the entry for the next try
    assert memory.counters.errors == 2 and memory.counters.stored == 0
    await memory.close()


def test_the_key_covers_everything_that_decides_the_translation() -> None:
    spec = JobSpec(job_id="1", text="Cafe\u0301", source_lang="en", target_lang="fr", created_at=0.0)
    key = memory_key(spec, "m@1", "p:1")
    assert memory_key(msgspec.structs.replace(spec, job_id="2", text="Caf\u00e9"), "m@1", "p:1") == key  # NFC
    variants = [
        memory_key(spec, "m@2", "p:1"),
        memory_key(spec, "m@1", "p:2"),
        memory_key(msgspec.structs.replace(spec, target_lang="de"), "m@1", "p:1"),
        memory_key(msgspec.structs.replace(spec, glossary={"Cafe": "Bistro"}), "m@1", "p:1"),
        memory_key(msgspec.structs.replace(spec, context="A menu."), "m@1", "p:1"),
    ]
    assert len({key, *variants}) == 6


async def test_a_refused_batch_is_dropped_and_the_next_ones_are_stored(settings: Settings) -> None:
    memory = TranslationMemory(_memory_settings(settings), "postgresql://unused", model_id="m", profile_id="p:1")
    stored: list[int] = []

    async def store(entries: list[object]) -> None:
        if not stored:
            stored.append(0)
            raise MemoryStoreError("the translation memory refused a statement (value too long)")
        stored.append(len(entries))

    memory._writer.store = store  # type: ignore[method-assign,assignment]
    for i in range(3):
        spec = JobSpec(job_id=str(i), text=f"Text {i}", source_lang="en", target_lang="fr", created_at=0.0)
        memory.remember(spec, Translation(f"Texte {i}", 3, 2, "stop"))
    await memory.flush()  # refused: dropped, not retried for ever
    assert (memory.counters.dropped, memory.counters.stored) == (3, 0)
    spec = JobSpec(job_id="4", text="Text 4", source_lang="en", target_lang="fr", created_at=0.0)
    memory.remember(spec, Translation("Texte 4", 3, 2, "stop"))
    memory.remember(spec, Translation("cut off", 3, 2, "length"))  # never stored
    await memory.flush()
    assert stored == [0, 1] and memory.counters.stored == 1


async def test_a_broken_detector_fails_a_strict_auto_job_and_the_worker_goes_on(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    engine = DeterministicEngine()
    worker = _worker(settings, service_urls, engine)

    def broken(text: str) -> str:
        raise RuntimeError("model file unreadable")

    def broken_guess(text: str, hints: object) -> str:
        raise RuntimeError("model file unreadable")

    worker.consumer._detector.detect = broken  # type: ignore[method-assign]
    worker.consumer._detector.best_guess = broken_guess  # type: ignore[method-assign,assignment]
    await worker.start()
    try:
        auto, plain, guessed = await wait_all(
            client,
            [
                client.submit("Hello there, friend.", "auto", "fr"),
                client.submit("Hello", "en", "fr"),
                client.submit("Hallo", "auto", "fr", source_hints=["de", "en"]),
            ],
        )
    finally:
        await worker.stop(grace_seconds=5)
    assert auto.status is JobStatus.FAILED and auto.error and "model file unreadable" in auto.error
    assert plain.status is JobStatus.SUCCEEDED
    # a best guess was asked for: the likeliest hint rather than a failure
    assert guessed.status is JobStatus.SUCCEEDED and guessed.detected_source_lang == "de"


def _submit_as(client: Client, tenant: str | None, text: str) -> str:
    """Submit ``text`` as an API tenant's job (``tenant``; None: a job without one, as the Python client's)."""
    return client.run(client.core.submit(text, "en", "fr", tenant=tenant))


async def test_a_tenant_is_never_served_another_tenants_translation(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    """Issue 33: tenant B got from_memory: true (0.7 ms against 52 ms) for a text tenant A had translated."""
    text = f"A secret sentence {uuid.uuid4()}."
    engine = DeterministicEngine()
    worker = _worker(_memory_settings(settings), service_urls, engine)
    await worker.start()
    try:
        [first] = await wait_all(client, [_submit_as(client, "tenant-a", text)])
        await _stored(worker, 1)
        [other] = await wait_all(client, [_submit_as(client, "tenant-b", text)])
        [no_tenant] = await wait_all(client, [_submit_as(client, None, text)])
        await _stored(worker, 3)
        [again, other_again] = await wait_all(
            client, [_submit_as(client, "tenant-a", text), _submit_as(client, "tenant-b", text)]
        )
    finally:
        await worker.stop(grace_seconds=5)
    assert first.status is JobStatus.SUCCEEDED and not first.from_memory
    # B's job was translated for B (the engine ran it: it has its tokens), not recalled from A's memory.
    assert other.status is JobStatus.SUCCEEDED and not other.from_memory and other.prompt_tokens
    assert not no_tenant.from_memory  # jobs without a tenant have a memory of their own
    assert again.from_memory and again.translation == first.translation  # A's own memory still serves A
    assert other_again.from_memory and other_again.translation == other.translation
    assert engine.requests == 3


async def test_identical_jobs_of_two_tenants_in_flight_are_not_shared(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    text = f"Two tenants at once {uuid.uuid4()}."
    engine = DeterministicEngine(delay_s=0.3)
    worker = _worker(_memory_settings(settings), service_urls, engine)
    ids = [_submit_as(client, "tenant-a", text), _submit_as(client, "tenant-b", text)]
    await worker.start()
    try:
        jobs = await wait_all(client, ids)
    finally:
        await worker.stop(grace_seconds=5)
    assert all(job.status is JobStatus.SUCCEEDED and not job.from_memory for job in jobs)
    assert engine.requests == 2 and worker.memory.counters.shared == 0


async def test_a_shared_memory_serves_every_tenant(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    """``DRAGOMAN_MEMORY_SCOPE=shared``: one memory for all (documented as letting tenants learn each other's texts)."""
    text = f"A shared sentence {uuid.uuid4()}."
    engine = DeterministicEngine()
    shared = _memory_settings(settings).model_copy(update={"memory_scope": "shared"})
    worker = _worker(shared, service_urls, engine)
    await worker.start()
    try:
        [first] = await wait_all(client, [_submit_as(client, "tenant-a", text)])
        await _stored(worker, 1)
        later = [_submit_as(client, "tenant-b", text), _submit_as(client, None, text)]
        [other, no_tenant] = await wait_all(client, later)
    finally:
        await worker.stop(grace_seconds=5)
    assert not first.from_memory
    assert other.from_memory and no_tenant.from_memory and other.translation == first.translation
    assert engine.requests == 1


def test_a_tenants_key_differs_and_no_tenant_keeps_the_key_it_had() -> None:
    spec = JobSpec(job_id="1", text="Hello.", source_lang="en", target_lang="fr", created_at=0.0)
    assert memory_key(spec, "m@1", "p:1", "") == memory_key(spec, "m@1", "p:1")  # entries stored before stay valid
    assert len({memory_key(spec, "m@1", "p:1", scope) for scope in ("", "a", "b")}) == 3
