"""The source hints the API gives a request's ``auto`` texts (``api.source_hints``): the request's language, then the
key's recent languages, then the default; and the worker's best guess that follows them (the fallback chain)."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI

from api.services import ApiServices
from api.source_hints import request_language, source_hints, with_source_hints
from contract.language_detection import LanguageDetector
from contract.schemas import TranslationRequest
from contract.settings import Settings

ENGLISH = "Open the file before you start, then save your changes and close the window."
GERMAN = "Guten Morgen, wie geht es Ihnen heute? Wir fahren morgen mit dem Zug nach Berlin."
FRENCH = "Bonjour tout le monde, comment allez-vous aujourd'hui ? Nous partons demain matin."


@pytest.fixture
def api(app: FastAPI, http: httpx.AsyncClient) -> ApiServices:
    """The application's services, inside its lifespan (``http`` runs it)."""
    services: ApiServices = app.state.services
    return services


def _tenant() -> str:
    return f"hints-{uuid.uuid4().hex[:8]}"


async def test_the_chain_request_then_recent_then_default(api: ApiServices) -> None:
    tenant, detector = _tenant(), LanguageDetector()
    # nothing known: the default alone
    assert await source_hints(api, tenant, ["Hallo"]) == ("en",)
    assert detector.best_guess("Hallo", ("en",)).language == "en"
    # a request of German texts: its language comes first, and is remembered for the key
    assert await source_hints(api, tenant, ["Hallo", GERMAN]) == ("de", "en")
    assert detector.best_guess("Hallo", ("de", "en")).language == "de"
    # the next request is a short text alone: the key's recent language, then the default
    assert await source_hints(api, tenant, ["Hallo"]) == ("de", "en")
    # a request the detector is sure of beats the recent languages; the recent ones follow, the more frequent first
    assert await source_hints(api, tenant, [FRENCH]) == ("fr", "de", "en")
    assert await source_hints(api, tenant, ["Hallo"]) == ("fr", "de", "en")  # once each: the newer first
    assert await source_hints(api, tenant, [GERMAN]) == ("de", "fr", "en")
    assert await source_hints(api, tenant, ["Hallo"]) == ("de", "fr", "en")  # German twice, French once
    assert detector.best_guess("Hallo", ("de", "fr", "en")).language == "de"
    assert detector.best_guess("Привет", ("de", "ru", "en")).language == "ru"  # a hint the script rules out is passed
    # another key's tenant knows none of it
    assert await source_hints(api, _tenant(), ["Hallo"]) == ("en",)


async def test_the_default_and_the_recent_memory_are_settings(settings: Settings) -> None:
    app = _app(settings.model_copy(update={"detection_default_language": "pt-BR", "detection_recent_requests": 0}))
    async with app.router.lifespan_context(app):
        api: ApiServices = app.state.services
        tenant = _tenant()
        assert await source_hints(api, tenant, [GERMAN]) == ("de", "pt-BR")
        assert await source_hints(api, tenant, ["Hallo"]) == ("pt-BR",)  # nothing was kept
        assert not await api.client.redis.exists(api.client.keys.recent_sources(tenant))


def _app(settings: Settings) -> FastAPI:
    from api import create_app

    return create_app(settings)


async def test_only_best_guess_auto_requests_get_hints(api: ApiServices) -> None:
    requests = [
        TranslationRequest(text="Save", source_lang="auto", target_lang="fr"),
        TranslationRequest(text="Save", source_lang="AUTO", target_lang="fr"),
        TranslationRequest(text="Save", source_lang="en", target_lang="fr"),
        TranslationRequest(text="Save", source_lang="auto", target_lang="fr"),
    ]
    hinted = await with_source_hints(api, _tenant(), requests, [True, True, True, False])
    assert [request.source_hints for request in hinted] == [("en",), ("en",), None, None]
    assert await with_source_hints(api, _tenant(), requests, [False] * 4) == requests


def test_the_request_language_reads_the_texts_together() -> None:
    assert request_language(["Save"]) is None  # one word: not sure
    assert request_language(["Save", "Cancel", ENGLISH]) == "en"
    assert request_language([GERMAN * 40, ENGLISH * 40]) == "de"  # the first 2,000 characters decide
    assert request_language([]) is None
