"""A busy deployment and a client that gives up and retries: the official ``deepl`` SDK against a slow engine.

The SDK waits ``deepl.http_client.min_connection_timeout`` (10 s) per attempt and sends the same request again,
up to five times. Here the engine answers in 6 s and the SDK waits 2 s per attempt: its retry must join the
first attempt's job (one job, one engine request) and return the translation, where every attempt used to
make a job of its own and cancel the one before, and the SDK gave up with ``ConnectionException``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import deepl
import pytest

from api import create_app
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from storage import ApiKeyStore, AsyncConnectionPool
from tests.api.conftest import uvicorn_serving
from tests.worker.conftest import identity_worker
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(180)

ENGINE_SECONDS = 6.0
SDK_ATTEMPT_SECONDS = 2.0


class SlowTexts:
    """The engine's delay: ``ENGINE_SECONDS`` for texts that ask to be slow, counting the requests that reach it."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> float:
        with self._lock:
            self.seen.append(prompt)
        return ENGINE_SECONDS if prompt.startswith("slow") else 0.0


@pytest.fixture(scope="module")
def slow_door(
    service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, SlowTexts]]:
    """The API and a worker whose engine takes 6 s on "slow" texts; the URL, a key and the engine's log."""
    settings = Settings(
        redis_url=service_urls.redis_url,
        database_url=service_urls.database_url,
        data_dir=tmp_path_factory.mktemp("retries") / "data",
        key_prefix=f"test-{uuid.uuid4().hex[:10]}",
        writer_flush_ms=2,
        read_block_ms=50,
        metrics_port=0,
        metrics_host="127.0.0.1",
        memory_enabled=False,
        quality_check_processes=0,
    )
    slow = SlowTexts()
    loop = LoopThread("retries-test")
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=1)
    worker = identity_worker(settings, service_urls, DeterministicEngine(delay_for=slow))
    loop.run(worker.start())
    try:
        tenant = f"retries-{uuid.uuid4().hex[:8]}"
        key = loop.run(ApiKeyStore(pool).create(f"{tenant}-{settings.key_prefix}", tenant=tenant))[1]
        with uvicorn_serving(create_app(settings)) as url:
            yield url, key, slow
    finally:
        loop.run(worker.stop(grace_seconds=5))
        loop.run(pool.close())
        loop.close()


def test_the_sdks_retries_join_the_first_attempt_and_the_text_runs_once(
    slow_door: tuple[str, str, SlowTexts], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, key, slow = slow_door
    monkeypatch.setattr(deepl.http_client, "min_connection_timeout", SDK_ATTEMPT_SECONDS)
    attempts: list[float] = []
    send = deepl.http_client.HttpClient._internal_request

    def counted(self: deepl.http_client.HttpClient, *args: Any, **kwargs: Any) -> Any:
        attempts.append(kwargs.get("timeout", 0.0))
        return send(self, *args, **kwargs)

    monkeypatch.setattr(deepl.http_client.HttpClient, "_internal_request", counted)
    translator = deepl.Translator(key, server_url=url)
    result = translator.translate_text("slow: where is the station?", source_lang="EN", target_lang="DE")
    assert isinstance(result, deepl.TextResult) and result.text == "slow: where is the station?"
    assert len(attempts) >= 2, "the engine answered within the SDK's first attempt: the test proves nothing"
    assert slow.seen.count("slow: where is the station?") == 1  # one job, whatever the attempts
