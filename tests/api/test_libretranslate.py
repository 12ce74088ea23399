"""LibreTranslate's API on dragoman: the ``libretranslatepy`` client and Weblate's requests, against a real server.

The app runs under uvicorn in a thread; a worker on the deterministic engine runs on the test's
loop and "translates" into capitals, keeping placeholder tags, so a translation differs from its
source and markup that came back intact shows. The client is synchronous: its calls go through
``asyncio.to_thread``. ``/translate_file`` needs the orchestrator too (it splits and assembles the
document): it runs on this thread while the upload waits in another.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from libretranslatepy import LibreTranslateAPI  # type: ignore[import-untyped]  # no stubs, no py.typed

from api import create_app
from api.services import ApiServices
from contract.ids import canonical_uuid
from contract.inline_tags import Tag
from contract.inline_tags import tokens as tag_tokens
from contract.progress import GroupProgress
from contract.settings import Settings
from producer.requests import Prepared
from tests.api.conftest import KeyMaker, bearer, uvicorn_serving
from tests.api.short_texts import COMMON_UI_STRINGS, LONG_ENGLISH, SURELY
from tests.docs.examples import ROOT, blocks
from tests.orchestrator.test_runs_and_documents import ORCHESTRATE_EVERY_S, run_orchestrator
from tests.waiting import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)

ENGLISH = "The weather is lovely today, so we are going for a long walk in the park."
GERMAN = "Guten Morgen, wie geht es Ihnen heute? Wir fahren morgen mit dem Zug nach Berlin."


def _shout(text: str, request: Any) -> str:
    """The "translation": capitals, the placeholder tags kept as they are."""
    return "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tag_tokens(text))


def shouting() -> DeterministicEngine:
    """An engine whose translation is the text in capitals (tags kept)."""
    return DeterministicEngine(rewrite=_shout)


async def test_the_libretranslatepy_client_translates_detects_and_lists_languages(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    client = LibreTranslateAPI(api_url, api_key=tenant_key("acme"))
    async with start_worker(shouting()):
        translated = await asyncio.to_thread(client.translate, "Hello, world.", "en", "fr")
    assert translated == "HELLO, WORLD."

    detected = await asyncio.to_thread(client.detect, "Bonjour tout le monde, comment allez-vous aujourd'hui ?")
    assert detected[0]["language"] == "fr" and 50 < detected[0]["confidence"] <= 100
    assert len(detected) <= 3 and all(set(d) == {"confidence", "language"} for d in detected)

    languages = await asyncio.to_thread(client.languages)
    french = next(language for language in languages if language["code"] == "fr")
    assert french["name"] == "French" and "de" in french["targets"] and "fr" not in french["targets"]
    assert len(languages) == len(DEFAULT_LANGUAGES)


DEFAULT_LANGUAGES = {
    *("ar", "az", "bg", "bn", "ca", "cs", "da", "de", "el", "en", "eo", "es", "et", "eu", "fa", "fi", "fr"),
    *("ga", "gl", "he", "hi", "hu", "id", "it", "ja", "ko", "ky", "lt", "lv", "ms", "nb", "nl", "pl", "pt"),
    *("pt-BR", "ro", "ru", "sk", "sl", "sq", "sr", "sv", "th", "tl", "tr", "uk", "ur", "vi", "zh", "zh-Hant"),
}
"""LibreTranslate's own languages: what ``/languages`` lists unless ``DRAGOMAN_API_LANGUAGES`` names others."""

NORWEGIAN = "Jeg har ikke tid til å snakke med deg nå, vi sees i morgen på kontoret."


async def test_languages_lists_what_the_deployment_translates_nb_included(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    """Issue 49: ``/languages`` listed the detector's languages (Latin, Ancient Greek) and no ``nb``, so Weblate's
    ``nb_NO`` got no suggestions although ``target: nb`` worked."""
    client = LibreTranslateAPI(api_url, api_key=tenant_key("weblate"))
    languages = {language["code"]: language for language in await asyncio.to_thread(client.languages)}
    assert set(languages) == DEFAULT_LANGUAGES and not {"la", "grc", "hbo"} & set(languages)
    assert languages["nb"]["name"] == "Norwegian Bokmål" and "en" in languages["nb"]["targets"]
    assert languages["zh-Hant"]["name"] == "Chinese (Traditional)"
    async with start_worker(shouting()):
        assert await asyncio.to_thread(client.translate, "Hello", "en", "nb") == "HELLO"
        assert await asyncio.to_thread(client.translate, "Hei", "nb", "en") == "HEI"
        answer = await asyncio.to_thread(client.translate, NORWEGIAN, "auto", "en")
    assert answer == NORWEGIAN.upper()
    detected = await asyncio.to_thread(client.detect, NORWEGIAN)
    assert detected[0]["language"] == "nb"  # the detector's "no", named as /languages names it


async def test_the_listed_languages_are_a_setting(settings: Settings, tenant_key: KeyMaker) -> None:
    """A deployment whose models translate other languages names them (``DRAGOMAN_API_LANGUAGES``)."""
    listed = settings.model_copy(update={"api_languages": ["en", "de", "la"]})
    with uvicorn_serving(create_app(listed)) as url:
        languages = await asyncio.to_thread(LibreTranslateAPI(url).languages)
    assert [(x["code"], x["name"], x["targets"]) for x in languages] == [
        ("en", "English", ["de", "la"]),
        ("de", "German", ["en", "la"]),
        ("la", "Latin", ["en", "de"]),
    ]
    with pytest.raises(ValueError, match="unknown language code 'xx-klingon'"):
        Settings(api_languages=["en", "xx-klingon"])


async def test_weblates_requests(api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory) -> None:
    """What weblate/machinery/libretranslate.py sends: GET /languages with no key; each string as a form POST with
    api_key (Weblate 4), or a batch of strings as one JSON list (Weblate 5's BatchMachineTranslation)."""
    key = tenant_key("weblate")
    headers = {"User-Agent": "Weblate/5.0", "Accept": "application/json"}
    async with httpx.AsyncClient(base_url=f"{api_url}/", headers=headers, timeout=None) as http:
        codes = [x["code"] for x in (await http.get("languages")).json()]
        assert {"en", "de", "zh", "pt"} <= set(codes)
        async with start_worker(shouting()):
            form = {"api_key": key, "q": "Hello %s, you have {count} messages", "source": "en", "target": "de"}
            response = await http.post("translate", data=form)
            batch = {"api_key": key, "q": ["Open file", "Save as…", "Quit"], "source": "en", "target": "zh"}
            listed = await http.post("translate", json=batch)
            crlf = await http.post("translate", data={**form, "q": "Line one\r\nline two"})
        assert response.status_code == 200, response.text
        assert response.json() == {"translatedText": "HELLO %S, YOU HAVE {COUNT} MESSAGES"}
        assert listed.json() == {"translatedText": ["OPEN FILE", "SAVE AS…", "QUIT"]}
        assert crlf.json() == {"translatedText": "LINE ONE\nLINE TWO"}  # a form's CRLF read as LF, as LibreTranslate


async def test_a_list_auto_source_and_html_keep_order_detection_and_tags(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    page = (
        '<p>Please read <a href="https://example.com/guide?a=1&amp;b=2">the whole guide</a> before you begin.<br>'
        "Then <b>start</b> the installation of the program.</p>"
    )
    body = {
        "q": [f"<i>{ENGLISH}</i>", "  ", GERMAN, page],
        "source": "auto",
        "target": "fr",
        "format": "html",
        "alternatives": 2,
        "api_key": key,
    }
    async with start_worker(shouting()), httpx.AsyncClient(timeout=None) as http:
        response = await http.post(f"{api_url}/translate", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["translatedText"] == [
        f"<i>{ENGLISH.upper()}</i>",
        "  ",  # a blank text comes back as it was
        GERMAN.upper(),
        '<p>PLEASE READ <a href="https://example.com/guide?a=1&amp;b=2">THE WHOLE GUIDE</a> BEFORE YOU BEGIN.<br>'
        "THEN <b>START</b> THE INSTALLATION OF THE PROGRAM.</p>",
    ]
    languages = [d["language"] for d in answer["detectedLanguage"]]
    assert languages == ["en", "en", "de", "en"]  # the blank one: LibreTranslate's "en" at 0
    assert answer["detectedLanguage"][0]["confidence"] > 50 and answer["detectedLanguage"][1]["confidence"] == 0
    assert answer["alternatives"] == [[], [], [], []]


async def test_source_auto_never_refuses_short_texts(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    """Issue 49: short UI strings with ``source: auto`` were a 500 (the whole request failed with one of them).
    Each is translated now; ``detectedLanguage`` says which language was used, with the detector's confidence."""
    key = tenant_key("acme")
    client = LibreTranslateAPI(api_url, api_key=key)
    body = {"q": list(COMMON_UI_STRINGS), "source": "auto", "target": "fr", "api_key": key}
    mixed = {
        "q": ["Save", LONG_ENGLISH, "Cancel", "Help"],
        "source": "auto",
        "target": "de",
        "api_key": tenant_key("b"),
    }
    async with start_worker(shouting()), httpx.AsyncClient(timeout=None) as http:
        save = await asyncio.to_thread(client.translate, "Save", "auto", "de")
        greeting = await asyncio.to_thread(client.translate, "Привет", "auto", "de")
        listed = await http.post(f"{api_url}/translate", json=body)
        together = await http.post(f"{api_url}/translate", json=mixed)
        alone = await http.post(
            f"{api_url}/translate", data={"q": "Gracias", "source": "auto", "target": "en", "api_key": key}
        )
    assert (save, greeting) == ("SAVE", "ПРИВЕТ")
    assert listed.status_code == 200, listed.text
    answer = listed.json()
    assert answer["translatedText"] == [text.upper() for text in COMMON_UI_STRINGS]
    detected = dict(zip(COMMON_UI_STRINGS, answer["detectedLanguage"], strict=True))
    for text, language in SURELY.items():
        assert detected[text]["language"] == language and detected[text]["confidence"] > 20
    assert all(0 <= d["confidence"] <= 100 and d["language"] for d in detected.values())
    # a guess taken from a hint (the default, English) says how unsure it is: a few percent, not 0 nor 100
    assert detected["Save"]["language"] == "en" and 0 < detected["Save"]["confidence"] < 10
    assert together.status_code == 200, together.text
    assert together.json()["translatedText"] == ["SAVE", LONG_ENGLISH.upper(), "CANCEL", "HELP"]
    assert [d["language"] for d in together.json()["detectedLanguage"]] == ["en"] * 4  # the request's language
    assert alone.status_code == 200 and set(alone.json()["detectedLanguage"]) == {"confidence", "language"}


async def test_the_history_shows_an_html_text_as_the_client_sent_it(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    """Issue 49: a ``format: html`` job showed dragoman's placeholders in the history and ``GET /v1/jobs/{id}``."""
    key = tenant_key("html")
    page = '<p>Read <a href="/guide">the guide</a> first.</p>'
    async with start_worker(shouting()):
        answer = await http.post(
            "/translate", json={"q": page, "source": "en", "target": "de", "format": "html", "api_key": key}
        )
    assert answer.status_code == 200, answer.text
    translated = answer.json()["translatedText"]
    assert translated == '<p>READ <a href="/guide">THE GUIDE</a> FIRST.</p>'
    (listed,) = (await http.get("/v1/jobs", headers=bearer(key))).json()["data"]
    assert (listed["text"], listed["translation"], listed["metadata"]) == (page, translated, {})
    one = (await http.get(f"/v1/jobs/{listed['id']}", headers=bearer(key))).json()
    assert (one["text"], one["translation"]) == (page, translated)


async def test_one_text_with_a_source_answers_a_string_without_detection(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    body = {"q": "Fine <b>bold</b> text", "source": "en", "target": "es", "format": "html"}
    async with start_worker(shouting()), httpx.AsyncClient(timeout=None) as http:
        response = await http.post(f"{api_url}/translate", json=body, headers=bearer(tenant_key("acme")))
    assert response.json() == {"translatedText": "FINE <b>BOLD</b> TEXT"}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"q": "Hi", "source": "en", "target": "fr"}, 400, "API key"),
        ({"q": "Hi", "source": "en", "target": "fr", "api_key": "not-a-key"}, 403, "Invalid API key"),
        ({"q": "", "source": "en", "target": "fr", "api_key": "KEY"}, 400, "missing q parameter"),
        ({"q": [], "source": "en", "target": "fr", "api_key": "KEY"}, 400, "missing q parameter"),
        ({"q": "Hi", "source": "en", "api_key": "KEY"}, 400, "missing target parameter"),
        ({"q": "Hi", "source": "en", "target": "zz-qq-123456789", "api_key": "KEY"}, 400, "zz-qq-123456789"),
        ({"q": "Hi", "source": "klingonish", "target": "fr", "api_key": "KEY"}, 400, "klingonish"),
        ({"q": "Hi", "source": "en", "target": "fr", "format": "pdf", "api_key": "KEY"}, 400, "pdf format"),
        ({"q": "Hi", "source": "en", "target": "fr", "alternatives": "x", "api_key": "KEY"}, 400, "alternatives"),
    ],
)
async def test_translate_errors_are_libretranslates_shape(
    http: httpx.AsyncClient, tenant_key: KeyMaker, body: dict[str, Any], status: int, says: str
) -> None:
    key = tenant_key("acme")
    filled = {name: (key if value == "KEY" else value) for name, value in body.items()}
    response = await http.post("/translate", json=filled)
    assert response.status_code == status, response.text
    assert says in response.json()["error"]


async def test_more_texts_than_allowed_is_libretranslates_400_not_413_or_422(
    http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings
) -> None:
    """LibreTranslate's clients know 400/403/429: a request over a limit it can never meet is its 400."""
    key = tenant_key("many", max_queued_jobs=2)
    over_queue = await http.post(
        "/translate", json={"q": ["a", "b", "c"], "source": "en", "target": "de", "api_key": key}
    )
    assert over_queue.status_code == 400 and "queued" in over_queue.json()["error"]
    texts = ["a"] * (settings.api_max_jobs_per_request + 1)
    over_request = await http.post("/translate", json={"q": texts, "source": "en", "target": "de", "api_key": key})
    assert over_request.status_code == 400 and "over the limit" in over_request.json()["error"]


async def test_translate_file_refuses_a_docx_that_is_not_a_zip_at_once(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    """A 400 at upload, not a wait for the orchestrator to find it (or a 504 with no worker running)."""
    fields = {"source": "en", "target": "de", "api_key": tenant_key("docx")}
    files = {"file": ("letter.docx", b"plain text, not a Word file")}
    response = await http.post("/translate_file", data=fields, files=files)
    assert response.status_code == 400, response.text
    assert "not a zip" in response.json()["error"]


async def test_translate_file_cancels_its_document_when_the_client_goes_away(
    app: FastAPI, http: httpx.AsyncClient, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The document's id was never answered: once the request's task is cancelled, nobody could fetch it."""
    api: ApiServices = app.state.services
    submitted: list[str] = []
    submit = api.groups.submit_document

    async def recording_submit(*args: Any, **kwargs: Any) -> str:
        document_id = await submit(*args, **kwargs)
        submitted.append(document_id)
        return document_id

    cancelled: list[str] = []
    cancel = api.groups.cancel

    async def recording_cancel(tenant: str, kind: str, group_id: str) -> GroupProgress:
        cancelled.append(group_id)
        return await cancel(tenant, kind, group_id)

    monkeypatch.setattr(api.groups, "submit_document", recording_submit)
    monkeypatch.setattr(api.groups, "cancel", recording_cancel)
    key = tenant_key("gone")
    fields = {"source": "en", "target": "de", "api_key": key}
    upload = asyncio.create_task(http.post("/translate_file", data=fields, files={"file": ("a.txt", b"Hello there.")}))
    while not submitted:
        await asyncio.sleep(0.01)
    upload.cancel()
    await asyncio.gather(upload, return_exceptions=True)

    assert cancelled == submitted  # requested: the orchestrator (not running here) finishes it when it splits


async def test_detect_takes_a_form_or_a_bearer_key(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    key = tenant_key("acme")
    by_form = await http.post("/detect", data={"q": GERMAN, "api_key": key})
    by_bearer = await http.post("/detect", json={"q": GERMAN}, headers=bearer(key))
    assert by_form.json() == by_bearer.json() and by_form.json()[0]["language"] == "de"
    assert (await http.post("/detect", data={"q": GERMAN})).status_code == 400
    assert "missing q" in (await http.post("/detect", data={"q": " ", "api_key": key})).json()["error"]
    bad_json = await http.post("/detect", content=b"[1, 2]", headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400 and "Invalid JSON format" in bad_json.json()["error"]
    settings = (await http.get("/frontend/settings")).json()
    assert settings["keyRequired"] is True and ".md" in settings["supportedFilesFormat"]
    assert settings["frontendTimeout"] == 500  # LibreTranslate's: the web page's pause after typing (ms)


async def test_every_refusal_is_libretranslates_shape_and_status(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """Issue 49's audit: ``{"error": "<a string>"}``, 400 for bad input, 403 for a bad key, 429 past the rate, on
    every LibreTranslate route (``/suggest`` and ``/spec`` answered 404 with dragoman's error object)."""
    suggested = await http.post("/suggest", data={"q": "Hi", "s": "Salut", "source": "en", "target": "fr"})
    assert suggested.status_code == 403 and suggested.json()["error"] == "Suggestions are disabled on this server."
    spec = await http.get("/spec")
    assert spec.status_code == 200 and "/translate" in spec.json()["paths"]
    key = tenant_key("audit", rate_limit_per_minute=2)
    answers = [
        (await http.post("/translate", json={"q": "Hi", "source": "en", "target": "fr"}), 400),  # no key
        (await http.post("/translate", json={"q": "Hi", "source": "en", "target": "fr", "api_key": "nope"}), 403),
        (await http.post("/detect", data={"q": "Hallo", "api_key": "nope"}), 403),
        (await http.post("/translate_file", data={"source": "en", "target": "fr", "api_key": key}), 400),
        (await http.post("/translate", json={"q": [1], "source": "en", "target": "fr", "api_key": key}), 400),
        (await http.get("/translate"), 405),
        (await http.post("/detect", data={"q": "Hallo", "api_key": key}), 429),  # the key's third request a minute
    ]
    for response, status in answers:
        assert response.status_code == status, (response.request.url, response.text)
        body = response.json()
        assert isinstance(body["error"], str) and body["error"], body
    assert answers[-1][0].headers.get("Retry-After")


MARKDOWN = """# Getting started

Install the *tool* first, then run it.

- One item here.
- Another **item** there.

| Name | Value |
| ---- | ----- |
| Size | Large |
"""


async def _with_orchestrator(call: Any) -> Any:
    """Run ``call`` in a thread while the orchestrator runs on this one (RQ's worker needs the main thread)."""
    task = asyncio.ensure_future(asyncio.to_thread(call))

    def done() -> bool:
        run_orchestrator()
        return task.done()

    await until(done, "the call answered, the orchestrator running meanwhile", every=ORCHESTRATE_EVERY_S)
    return task.result()


@pytest.mark.usefixtures("settings_env")
async def test_translate_file_and_download_round_trip(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory, settings: Settings
) -> None:
    key = tenant_key("acme")

    def upload() -> httpx.Response:
        files = {"file": ("guide.md", MARKDOWN.encode(), "text/markdown")}
        return httpx.post(
            f"{api_url}/translate_file",
            files=files,
            data={"source": "en", "target": "fr", "api_key": key},
            timeout=None,
        )

    async with start_worker(shouting()):
        response = await _with_orchestrator(upload)
    assert response.status_code == 200, response.text
    url = response.json()["translatedFileUrl"]
    assert url.startswith(f"{api_url}/download_file/") and url.endswith(".guide.md")
    async with httpx.AsyncClient(timeout=None) as http:
        download = await http.get(url)  # a link, as LibreTranslate's: no key needed
        assert download.status_code == 200, download.text
        assert download.text == MARKDOWN.upper()  # Markdown's structure kept, its prose "translated"
        assert download.headers["content-type"].startswith("text/markdown")
        assert 'filename="guide.md"' in download.headers["content-disposition"]
        token = url.rsplit("/", 1)[1].partition(".")[0]
        assert len(token) >= 32 and canonical_uuid(token) is None  # random, not the document's id
        made_up = await http.get(f"{api_url}/download_file/{'Z' * 32}.guide.md")
        assert made_up.status_code == 404 and "unknown or expired" in made_up.json()["error"]
        page = (await http.get(f"{api_url}/v1/documents", headers=bearer(key))).json()
        by_id = f"{api_url}/download_file/{page['data'][0]['id']}.guide.md"
        assert (await http.get(by_id, headers=bearer(key))).text == MARKDOWN.upper()  # by id: the key's tenant only
        by_form_key = await http.request("GET", by_id, data={"api_key": key})
        assert by_form_key.status_code == 200
        other = await http.get(by_id, headers=bearer(tenant_key("globex")))
        assert other.status_code == 404 and "error" in other.json()
        assert (await http.get(by_id)).status_code == 400  # no key
        garbled = await http.get(f"{api_url}/download_file/nothing", headers=bearer(key))
        assert garbled.status_code == 400 and "Invalid filename" in garbled.json()["error"]


@pytest.mark.usefixtures("settings_env")
async def test_translate_file_detects_the_source_of_source_auto(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    """``source=auto`` (LibreTranslate's default in its UIs) detects the file's language from its text."""
    key = tenant_key("acme")

    def upload() -> httpx.Response:
        files = {"file": ("brief.txt", f"{GERMAN}\n\nDanke.\n".encode(), "text/plain")}
        form = {"source": "auto", "target": "en", "api_key": key}
        return httpx.post(f"{api_url}/translate_file", files=files, data=form, timeout=None)

    async with start_worker(shouting()):
        response = await _with_orchestrator(upload)
    assert response.status_code == 200, response.text
    url = response.json()["translatedFileUrl"]
    async with httpx.AsyncClient(timeout=None) as http:
        assert (await http.get(url)).text == f"{GERMAN}\n\nDanke.\n".upper()
        document_id = (await http.get(f"{api_url}/v1/documents", headers=bearer(key))).json()["data"][0]["id"]
        view = (await http.get(f"{api_url}/v1/documents/{document_id}", headers=bearer(key))).json()
    assert view["detected_source_lang"] == "de" and view["status"] == "completed", view


async def test_translate_file_refusals(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    key = tenant_key("acme")
    form = {"source": "en", "target": "fr", "api_key": key}
    pdf = await http.post("/translate_file", files={"file": ("a.pdf", b"%PDF-1.4")}, data=form)
    assert pdf.status_code == 400 and "file format not supported" in pdf.json()["error"]
    empty = await http.post("/translate_file", files={"file": ("a.md", b"")}, data=form)
    assert empty.status_code == 400 and "empty file" in empty.json()["error"]
    missing = await http.post("/translate_file", data=form)
    assert missing.status_code == 400 and "missing file" in missing.json()["error"]
    bad_key = await http.post("/translate_file", files={"file": ("a.md", b"Hi")}, data={**form, "api_key": "nope"})
    assert bad_key.status_code == 403
    not_utf8 = await http.post("/translate_file", files={"file": ("a.txt", b"\xff\xfe")}, data=form)
    assert not_utf8.status_code == 400 and "error" in not_utf8.json()


async def test_the_guide_example_runs_as_written(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = [block for block in blocks(ROOT / "docs/guides/libretranslate-api.md") if block.kind == "python"]
    source = example.code
    assert '"http://127.0.0.1:8000/"' in source and 'api_key="dgm_..."' in source
    source = source.replace("http://127.0.0.1:8000", api_url).replace('"dgm_..."', repr(tenant_key("guide")))
    async with start_worker(shouting()):
        await asyncio.to_thread(exec, compile(source, "libretranslate-api.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "HELLO, WORLD."
    assert printed[1].startswith("[{'confidence': ") and "'language': 'de'}" in printed[1]
    assert printed[2].startswith("[{'code': 'ar', 'name': 'Arabic', 'targets': ['az', ")


async def test_a_client_that_disconnects_mid_submit_has_its_jobs_cancelled(
    app: FastAPI, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn does not cancel a request when its client goes: the door must notice, or the jobs run for nobody.

    The client goes while the submit is under way: a submit cut short by the cancellation left the jobs it
    had written queued (this test failed one run in three under load before the submit finished first).
    """
    key = tenant_key("hangup")
    submitted: list[str] = []
    with uvicorn_serving(app) as url:
        api: ApiServices = app.state.services
        write = api.client.submitter.write

        async def recording_write(prepared: Sequence[Prepared], *, only_new: bool = False) -> list[str]:
            ids = await write(prepared, only_new=only_new)
            submitted.extend(ids)
            await asyncio.sleep(0.5)  # the client goes while the submit is still under way: its jobs are queued
            return ids

        monkeypatch.setattr(api.client.submitter, "write", recording_write)
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps({"q": "Hello there.", "source": "en", "target": "de", "api_key": key}).encode()
        head = f"POST /translate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(body)}\r\n\r\n"
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(head.encode() + body)
        await writer.drain()
        await until(lambda: submitted, "the submit under way", every=0.01)
        writer.close()  # the client gives up: no worker runs, the job would wait for one
        await writer.wait_closed()
        async with httpx.AsyncClient(base_url=url, timeout=None) as client:

            async def cancelled() -> bool:
                job = (await client.get(f"/v1/jobs/{submitted[0]}", headers=bearer(key))).json()
                return bool(job["status"] == "cancelled")

            await until(cancelled, "the gone client's job cancelled")
