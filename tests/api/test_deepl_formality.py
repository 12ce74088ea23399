"""DeepL's ``formality`` against a model that cannot apply it (the default model's few-shot profile cannot):
``prefer_*`` falls back to the model's register, ``more``/``less`` are refused before anything is queued."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from contract.controls import Control
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from tests.api.conftest import KeyMaker
from tests.worker.conftest import identity_worker
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile

pytestmark = pytest.mark.timeout(60)


class NoFormalityProfile(IdentityProfile):
    """The identity profile of a model trained for context and glossaries but not formality."""

    supports = frozenset({Control.CONTEXT, Control.GLOSSARY})


@pytest.fixture
def worker_without_formality(settings: Settings, service_urls: ServiceUrls) -> Iterator[None]:
    """A worker (on a loop thread of its own: the API runs in the test's) whose heartbeat reports no formality."""
    loop = LoopThread("no-formality")
    engine = DeterministicEngine()
    worker = identity_worker(settings, service_urls, engine, profile=NoFormalityProfile(engine.tokenizer))
    loop.run(worker.start())
    try:
        yield
    finally:
        loop.run(worker.stop(grace_seconds=5))
        loop.close()


async def _translate(http: httpx.AsyncClient, key: str, formality: str) -> httpx.Response:
    body = {"text": ["Good morning."], "source_lang": "EN", "target_lang": "DE", "formality": formality}
    return await http.post("/v2/translate", json=body, headers={"Authorization": f"DeepL-Auth-Key {key}"})


async def test_prefer_falls_back_and_more_is_refused_before_queuing(
    http: httpx.AsyncClient, tenant_key: KeyMaker, worker_without_formality: None
) -> None:
    key = tenant_key("acme")
    preferred = await _translate(http, key, "prefer_more")
    assert preferred.status_code == 200, preferred.text
    assert preferred.json()["translations"][0]["text"] == "Good morning."  # translated, without the control
    refused = await _translate(http, key, "less")
    assert refused.status_code == 400 and refused.json()["code"] == "formality_not_supported", refused.text
    assert "use prefer_more/prefer_less" in refused.json()["message"]
    jobs = (await http.get("/v1/jobs", headers={"Authorization": f"Bearer {key}"})).json()["data"]
    assert [job["status"] for job in jobs] == ["succeeded"], jobs  # the refused text was never queued


async def test_formality_is_advertised_only_where_the_serving_model_applies_it(
    http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings, service_urls: ServiceUrls
) -> None:
    """Issue 49: ten targets were listed ``supports_formality`` while the model refused formality, so Weblate
    offered ``@formal``/``@informal`` variants that failed. Weblate's request: ``GET /v2/languages?type=target``."""
    headers = {"Authorization": f"DeepL-Auth-Key {tenant_key('weblate')}"}

    async def formal_targets() -> set[str]:
        answer = await http.get("/v2/languages", params={"type": "target"}, headers=headers)
        assert answer.status_code == 200, answer.text
        return {item["language"] for item in answer.json() if item["supports_formality"]}

    deepl_s = {"DE", "FR", "IT", "ES", "NL", "PL", "PT-BR", "PT-PT", "JA", "RU"}
    assert await formal_targets() == deepl_s  # no live worker reports its controls yet: as DeepL lists them
    loop = LoopThread("no-formality-languages")
    engine = DeterministicEngine()
    worker = identity_worker(settings, service_urls, engine, profile=NoFormalityProfile(engine.tokenizer))
    loop.run(worker.start())
    try:
        assert await formal_targets() == set()  # the serving profile applies no formality: none is advertised
    finally:
        loop.run(worker.stop(grace_seconds=5))
        loop.close()
