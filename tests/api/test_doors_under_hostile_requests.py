"""The DeepL and LibreTranslate doors under hostile requests (issue 48, items 1, 2 and 7): no request stalls the loop.

Each attack is a request a tenant may legally send, served in-process while :class:`LoopLag` watches
the event loop every other tenant's requests share: long texts full of unclosed comments or tags
with ``tag_handling``, a glossary of ten thousand terms against many texts, a glossary file of
500,000 lines. Their work is linear and runs on the API's work threads, so the loop's longest
stall stays far under :data:`STALL_BOUND_S` (before: seconds to minutes). Limits come before work:
80,000 texts, or more ``q`` than a request may carry, are refused before a single text is tagged
or matched; and a key sent outside the body is checked before the body is read.

The worker runs on a loop thread of its own, as a deployed worker is a process of its own: its work
is not the API's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from api import create_app
from api.libretranslate_html import tag_html
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from markup.placeholders import TaggedText
from tests.api.conftest import KeyMaker, with_unlimited_wait
from tests.api.loop_lag import STALL_BOUND_S, LoopLag
from tests.worker.conftest import identity_worker
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)

UNCLOSED_COMMENTS = "<!--" * 2_500
"""10,000 characters of comments never closed: today's DeepL tag regex read to the end from each (~0.1 s a text)."""

UNCLOSED_TAGS = "<a " * 3_333
"""9,999 characters of start tags never closed: today's LibreTranslate HTML regex read to the end from each."""


@pytest.fixture
def worker_thread(settings: Settings, service_urls: ServiceUrls) -> Iterator[None]:
    """A worker whose translation is the text, on a loop thread of its own (a deployed worker's own process)."""
    loop = LoopThread("hostile-requests-worker")
    worker = identity_worker(settings, service_urls, DeterministicEngine())
    loop.run(worker.start())
    try:
        yield
    finally:
        loop.run(worker.stop(grace_seconds=5))
        loop.close()


@asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of ``app``, its lifespan run around the block (the test's loop is the API's loop)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test", timeout=None) as client:
            yield client


def as_json(body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``post`` keywords that send ``body`` as JSON, encoded now: the in-process client's work is not the server's."""
    return {"content": json.dumps(body).encode(), "headers": {"Content-Type": "application/json", **(headers or {})}}


def deepl_key(key: str) -> dict[str, str]:
    """DeepL's Authorization header for ``key``."""
    return {"Authorization": f"DeepL-Auth-Key {key}"}


async def create_glossary(http: httpx.AsyncClient, key: str, terms: int) -> str:
    """A stored EN -> DE glossary of ``terms`` entries (the most one may hold: 10,000); its id."""
    entries = "\n".join(f"term{n:05d}\tBegriff{n:05d}" for n in range(terms))
    body = {"name": "big", "source_lang": "EN", "target_lang": "DE", "entries": entries, "entries_format": "tsv"}
    created = await http.post("/v2/glossaries", json=body, headers=deepl_key(key))
    assert created.status_code == 201, created.text
    glossary_id: str = created.json()["glossary_id"]
    return glossary_id


@pytest.mark.parametrize("tag_handling", ["xml", "html"])
async def test_long_texts_of_unclosed_comments_are_tagged_off_the_loop(
    http: httpx.AsyncClient, tenant_key: KeyMaker, worker_thread: None, tag_handling: str
) -> None:
    """Legal requests as large as DeepL's limit: 13 texts of 10,000 characters, and one text of 131,072 (issue 49:
    a text may take the whole request), answered while the loop never stalls (before: ~0.1 s a text on it)."""
    texts = [UNCLOSED_COMMENTS] * 13
    one = {"text": ["<!--" * 32_768], "source_lang": "EN", "target_lang": "DE", "tag_handling": tag_handling}
    sent = as_json(one, deepl_key(tenant_key("one")))
    async with LoopLag() as lag:
        answer = await http.post("/v2/translate", **sent)
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["translations"][0]["text"] == "<!--" * 32_768
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"
    body = {"text": texts, "source_lang": "EN", "target_lang": "DE", "tag_handling": tag_handling}
    sent = as_json(body, deepl_key(tenant_key("comments")))
    async with LoopLag() as lag:
        answer = await http.post("/v2/translate", **sent)
    assert answer.status_code == 200, answer.text[:500]
    assert [item["text"] for item in answer.json()["translations"]] == texts
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


async def test_html_texts_of_unclosed_tags_are_tagged_off_the_loop(
    http: httpx.AsyncClient, tenant_key: KeyMaker, worker_thread: None
) -> None:
    """LibreTranslate's ``format: html``: 100 texts of unclosed start tags, answered without stalling the loop."""
    texts = [UNCLOSED_TAGS] * 100
    body = {"q": texts, "source": "en", "target": "de", "format": "html", "api_key": tenant_key("tags")}
    sent = as_json(body)
    async with LoopLag() as lag:
        answer = await http.post("/translate", **sent)
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["translatedText"] == texts
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


async def test_80000_texts_with_a_big_glossary_are_refused_before_any_text_is_matched(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    """Over ``DRAGOMAN_API_MAX_JOBS_PER_REQUEST``: 413 at once (before: every text matched against every term first)."""
    key = tenant_key("many")
    glossary_id = await create_glossary(http, key, 10_000)
    body = {"text": ["a"] * 80_000, "source_lang": "EN", "target_lang": "DE", "glossary_id": glossary_id}
    sent = as_json(body, deepl_key(key))
    async with LoopLag() as lag:
        answer = await http.post("/v2/translate", **sent)
    assert answer.status_code == 413, answer.text[:500]
    assert "80,000 texts" in answer.json()["message"]
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


async def test_many_texts_against_a_big_glossary_are_matched_off_the_loop(
    http: httpx.AsyncClient, tenant_key: KeyMaker, worker_thread: None
) -> None:
    """60 texts of 2,000 characters (about DeepL's request limit) against 10,000 terms: answered, and the loop never
    waits for the matching."""
    key = tenant_key("glossary")
    glossary_id = await create_glossary(http, key, 10_000)
    prose = "The quick brown fox jumps over the lazy dog. " * 44
    texts = [f"Text {n} names term{n:05d} and term{n + 1:05d}. {prose}" for n in range(60)]
    body = {"text": texts, "source_lang": "EN", "target_lang": "DE", "glossary_id": glossary_id}
    sent = as_json(body, deepl_key(key))
    async with LoopLag() as lag:
        answer = await http.post("/v2/translate", **sent)
    assert answer.status_code == 200, answer.text[:500]
    assert [item["text"] for item in answer.json()["translations"]] == texts
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


async def test_a_glossary_file_of_500000_lines_is_parsed_off_the_loop(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    """Every line is read (and refused past 10,000 entries) on a work thread, not on the loop."""
    entries = "\n".join(f"t{n}\tu{n}" for n in range(500_000))
    body = {"name": "huge", "source_lang": "EN", "target_lang": "DE", "entries": entries, "entries_format": "tsv"}
    sent = as_json(body, deepl_key(tenant_key("huge")))
    async with LoopLag() as lag:
        answer = await http.post("/v2/glossaries", **sent)
    assert answer.status_code == 400, answer.text[:500]
    assert "500,000 entries" in answer.json()["message"]
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


async def test_libretranslate_refuses_too_many_or_too_long_texts_before_tagging_them(
    settings: Settings, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More ``q`` than a request may carry, or one past the text limit: LibreTranslate's 400, with nothing tagged."""
    tagged: list[str] = []

    def noted_tag_html(fragment: str) -> TaggedText:
        tagged.append(fragment)
        return tag_html(fragment)

    monkeypatch.setattr("api.routes.libretranslate.tag_html", noted_tag_html)
    limited = with_unlimited_wait(settings).model_copy(update={"api_max_jobs_per_request": 10})
    key = tenant_key("flood")
    async with served(create_app(limited)) as http:
        body: dict[str, Any] = {"q": [UNCLOSED_TAGS] * 11, "source": "en", "target": "de", "format": "html"}
        sent = as_json({**body, "api_key": key})
        async with LoopLag() as lag:
            too_many = await http.post("/translate", **sent)
        too_long = await http.post("/translate", json={**body, "q": ["x" * 10_001], "api_key": key})
    assert too_many.status_code == 400 and "11 texts in one request" in too_many.json()["error"], too_many.text
    assert too_long.status_code == 400 and "10,001 characters" in too_long.json()["error"], too_long.text
    assert not tagged
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


class WatchedBody:
    """A request body sent in chunks, which notes whether the server ever asked for one."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        self.read = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.read = True
        for start in range(0, len(self.data), 65_536):
            yield self.data[start : start + 65_536]


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("/v2/translate", {"Authorization": "DeepL-Auth-Key not-a-key"}),
        ("/v2/translate?auth_key=not-a-key", {}),
        ("/v2/glossaries", {"Authorization": "DeepL-Auth-Key not-a-key"}),
        ("/translate", {"Authorization": "Bearer not-a-key"}),
        ("/translate?api_key=not-a-key", {}),
        ("/detect", {"Authorization": "Bearer not-a-key"}),
    ],
)
async def test_an_unknown_key_outside_the_body_is_refused_before_the_body_is_read(
    http: httpx.AsyncClient, url: str, headers: dict[str, str]
) -> None:
    """The door's 403, and the body (a large valid request) never asked for: not one chunk read, let alone parsed."""
    body = WatchedBody({"text": [UNCLOSED_COMMENTS] * 100, "q": [UNCLOSED_TAGS] * 100, "target_lang": "DE"})
    answer = await http.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
    assert answer.status_code == 403, answer.text[:500]
    assert not body.read
