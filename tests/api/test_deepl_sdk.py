"""The DeepL-compatible door driven by the official ``deepl`` SDK, unchanged, against a real server and worker.

One server (uvicorn in a thread) and one worker (deterministic engine, on a loop thread of its own) serve
the whole module; each test has a tenant of its own. The worker's profile echoes the text and shows the
controls its job carried (``[formal]``, ``[glossary cat=Katze]``, ``[context]``), so a test sees what
reached the job. The SDK is synchronous: the tests are plain functions.
"""

from __future__ import annotations

import contextlib
import io
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import deepl
import httpx
import pytest
from deepl.api_data import MultilingualGlossaryDictionaryEntries

from api import create_app
from contract.schemas import JobSpec
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from storage import ApiKeyStore, AsyncConnectionPool
from tests.api.conftest import uvicorn_serving
from tests.api.short_texts import COMMON_UI_STRINGS, SURELY
from tests.docs.examples import ROOT, blocks
from tests.orchestrator.test_runs_and_documents import ORCHESTRATE_EVERY_S, run_orchestrator
from tests.orchestrator.test_segmenting import TRICKY_MARKDOWN
from tests.waiting import wait_for
from tests.worker.conftest import identity_worker
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile

pytestmark = pytest.mark.timeout(300)

LONG_GERMAN = "Guten Morgen, wie geht es Ihnen heute? Wir fahren morgen mit dem Zug nach Berlin."


class ControlsShownProfile(IdentityProfile):
    """The identity profile, with the controls a job carried appended to its text (and so to its translation)."""

    def build_prompt(self, spec: JobSpec) -> str:
        """The text, then ``[formal]``/``[informal]``, ``[glossary a=b;...]`` and ``[context]`` (a text's own)."""
        shown = [spec.text]
        if spec.formality is not None:
            shown.append(f"[{spec.formality.value}]")
        if spec.glossary:
            shown.append("[glossary " + ";".join(f"{s}={t}" for s, t in sorted(spec.glossary.items())) + "]")
        if spec.context is not None and spec.document_id is None:  # a document's segments carry the preceding text
            shown.append("[context]")
        return " ".join(shown)


@dataclass(frozen=True)
class Door:
    """The served API and a way to make keys of fresh tenants."""

    url: str
    loop: LoopThread
    keys: ApiKeyStore
    key_prefix: str

    def key(self) -> str:
        """A key of a tenant of its own."""
        tenant = f"deepl-{uuid.uuid4().hex[:8]}"
        return self.loop.run(self.keys.create(f"{tenant}-{self.key_prefix}", tenant=tenant))[1]

    def translator(self, key: str | None = None) -> deepl.Translator:
        """The official SDK on this server."""
        return deepl.Translator(key or self.key(), server_url=self.url)


@pytest.fixture(scope="module")
def door(service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    """The API and a worker for the module, and the environment the orchestrator's RQ tasks read."""
    settings = Settings(
        redis_url=service_urls.redis_url,
        database_url=service_urls.database_url,
        data_dir=tmp_path_factory.mktemp("deepl") / "data",
        key_prefix=f"test-{uuid.uuid4().hex[:10]}",
        writer_flush_ms=2,
        read_block_ms=50,
        metrics_port=0,
        metrics_host="127.0.0.1",
        memory_enabled=False,
        quality_check_processes=0,
    )
    loop = LoopThread("deepl-test")
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=1)
    engine = DeterministicEngine()
    worker = identity_worker(settings, service_urls, engine, profile=ControlsShownProfile(engine.tokenizer))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DRAGOMAN_REDIS_URL", service_urls.redis_url)
        env.setenv("DRAGOMAN_DATABASE_URL", service_urls.database_url)
        env.setenv("DRAGOMAN_KEY_PREFIX", settings.key_prefix)
        env.setenv("DRAGOMAN_DATA_DIR", str(settings.data_dir))
        env.setenv("DRAGOMAN_MEMORY_ENABLED", "false")
        loop.run(worker.start())
        try:
            with uvicorn_serving(create_app(settings)) as url:
                yield Door(url, loop, ApiKeyStore(pool), settings.key_prefix)
        finally:
            loop.run(worker.stop(grace_seconds=5))
            loop.run(pool.close())
            loop.close()


def _orchestrate_until_done(translator: deepl.Translator, handle: deepl.DocumentHandle) -> None:
    """Run the orchestrator (the document's split and assembly) between status reads until the document is done."""

    def done() -> bool:
        run_orchestrator()
        status = translator.translate_document_get_status(handle)
        assert status.ok, status
        return bool(status.done)

    wait_for(done, f"document {handle.document_id} done", every=ORCHESTRATE_EVERY_S)


def test_a_text_and_a_list(door: Door) -> None:
    translator = door.translator()
    one = translator.translate_text("Hello, how are you today?", target_lang="DE")
    assert isinstance(one, deepl.TextResult)
    assert one.text == "Hello, how are you today?"  # the echo engine: the translation is the text
    assert one.detected_source_lang == "EN" and one.billed_characters == 25

    many = translator.translate_text(["first", "second", "third"], source_lang="EN", target_lang="PT-BR")
    assert isinstance(many, list)
    assert [r.text for r in many] == ["first", "second", "third"]
    assert {r.detected_source_lang for r in many} == {"EN"}


def test_thirty_short_texts_without_a_source_are_all_translated(door: Door) -> None:
    """Issue 49: 23 of these were refused (400 "could not be told with confidence"). Each, alone, is translated
    now, and ``detected_source_lang`` says what was used: the detector's language where it is sure, else English
    (the default) unless the text's script rules it out."""
    translator = door.translator()
    results = [translator.translate_text(text, target_lang="DE") for text in COMMON_UI_STRINGS]
    assert [r.text for r in results] == list(COMMON_UI_STRINGS)  # the echo engine: the translation is the text
    detected = {text: r.detected_source_lang for text, r in zip(COMMON_UI_STRINGS, results, strict=True)}
    assert all(code and code.isupper() for code in detected.values()), detected
    for text, language in SURELY.items():
        assert detected[text] == language.upper()
    for text in ("Save", "Cancel", "Log in", "Help", "Delete"):
        assert detected[text] == "EN"
    assert detected["Привет"] != "EN"  # English is ruled out by the script
    # Han characters: Chinese first, but Japanese, which this key sent just before, is not ruled out
    assert detected["谢谢"] in {"ZH", "JA"}
    # the same thirty in one request: none refused, every one answered in order
    together = translator.translate_text(list(COMMON_UI_STRINGS), target_lang="FR")
    assert [r.text for r in together] == list(COMMON_UI_STRINGS)


def test_short_texts_take_the_language_of_the_request_and_the_keys_recent_requests(door: Door) -> None:
    key = door.key()
    translator = door.translator(key)
    mixed = translator.translate_text(["Hallo", LONG_GERMAN, "Abbrechen", "Danke"], target_lang="EN-US")
    assert [r.text for r in mixed] == ["Hallo", LONG_GERMAN, "Abbrechen", "Danke"]
    assert [r.detected_source_lang for r in mixed] == ["DE"] * 4  # the long text tells the short ones' language
    # the next request of the same key, one short text alone: the key's recent language, not the default
    assert translator.translate_text("Hallo", target_lang="EN-US").detected_source_lang == "DE"
    # another key's tenant has no such history: the default
    assert door.translator().translate_text("Hallo", target_lang="FR").detected_source_lang == "EN"


def test_formality_and_context_reach_the_job(door: Door) -> None:
    translator = door.translator()
    formal = translator.translate_text("Hi", source_lang="EN", target_lang="DE", formality="more")
    informal = translator.translate_text(
        "Hi", source_lang="EN", target_lang="FR", formality=deepl.Formality.PREFER_LESS
    )
    plain = translator.translate_text("Hi", source_lang="EN", target_lang="FR", formality="default", context="a chat")
    assert isinstance(formal, deepl.TextResult) and formal.text == "Hi [formal]"
    assert isinstance(informal, deepl.TextResult) and informal.text == "Hi [informal]"
    assert isinstance(plain, deepl.TextResult) and plain.text == "Hi [context]"


def test_a_glossary_is_created_used_read_and_deleted(door: Door) -> None:
    translator = door.translator()
    glossary = translator.create_glossary("animals", "EN", "DE", {"cat": "Katze", "dog": "Hund", "bird": "Vogel"})
    assert (glossary.name, glossary.source_lang, glossary.target_lang) == ("animals", "EN", "DE")
    assert glossary.entry_count == 3 and glossary.ready
    assert translator.get_glossary(glossary.glossary_id).glossary_id == glossary.glossary_id
    assert [g.glossary_id for g in translator.list_glossaries()] == [glossary.glossary_id]
    assert translator.get_glossary_entries(glossary) == {"cat": "Katze", "dog": "Hund", "bird": "Vogel"}
    pairs = {(pair.source_lang, pair.target_lang) for pair in translator.get_glossary_languages()}
    assert ("en", "de") in pairs and ("de", "en") in pairs and ("en", "en") not in pairs

    # Only the terms in the text travel with its job; EN-US matches the glossary's EN.
    used = translator.translate_text_with_glossary("My cat and my dog.", glossary, target_lang="DE")
    assert isinstance(used, deepl.TextResult) and used.text == "My cat and my dog. [glossary cat=Katze;dog=Hund]"
    by_id = translator.translate_text("A bird", source_lang="EN", target_lang="DE", glossary=glossary.glossary_id)
    assert isinstance(by_id, deepl.TextResult) and by_id.text == "A bird [glossary bird=Vogel]"
    with pytest.raises(deepl.DeepLException, match="is for EN -> DE, not EN -> FR"):
        translator.translate_text("A cat", source_lang="EN", target_lang="FR", glossary=glossary.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):  # another tenant's glossary is nobody's
        door.translator().get_glossary(glossary.glossary_id)

    translator.delete_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(glossary.glossary_id)
    assert translator.list_glossaries() == []


def test_multilingual_glossaries_are_created_used_read_and_deleted(door: Door) -> None:
    """The SDK's v3 calls (issue 49: /v3/glossaries was 404): one glossary, a dictionary per pair, used by
    ``translate_text(glossary=MultilingualGlossaryInfo)`` for the request's pair."""
    key = door.key()
    client = deepl.DeepLClient(key, server_url=door.url)
    glossary = client.create_multilingual_glossary(
        "pets",
        [
            MultilingualGlossaryDictionaryEntries("EN", "DE", {"cat": "Katze", "dog": "Hund"}),
            MultilingualGlossaryDictionaryEntries("DE", "EN", {"Katze": "cat"}),
        ],
    )
    pairs = {(d.source_lang, d.target_lang, d.entry_count) for d in glossary.dictionaries}
    assert glossary.name == "pets" and pairs == {("EN", "DE", 2), ("DE", "EN", 1)}
    fetched = client.get_multilingual_glossary(glossary.glossary_id)
    assert (fetched.glossary_id, fetched.creation_time) == (glossary.glossary_id, glossary.creation_time)
    entries = client.get_multilingual_glossary_entries(glossary, "EN", "DE").dictionaries
    assert [(d.source_lang, d.target_lang, d.entries) for d in entries] == [("en", "de", "cat\tKatze\ndog\tHund")]

    there = client.translate_text("My cat and my dog.", source_lang="EN", target_lang="DE", glossary=glossary)
    back = client.translate_text("Die Katze schläft.", source_lang="DE", target_lang="EN-US", glossary=glossary)
    assert isinstance(there, deepl.TextResult) and there.text == "My cat and my dog. [glossary cat=Katze;dog=Hund]"
    assert isinstance(back, deepl.TextResult) and back.text == "Die Katze schläft. [glossary Katze=cat]"
    with pytest.raises(deepl.DeepLException, match="has no dictionary for EN -> FR \\(it has DE -> EN, EN -> DE\\)"):
        client.translate_text("A cat", source_lang="EN", target_lang="FR", glossary=glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="has no dictionary for EN -> FR"):
        client.get_multilingual_glossary_entries(glossary, "EN", "FR")

    # a v2 glossary is a v3 glossary of one pair; the v2 routes serve only those
    single = client.create_glossary("one pair", "EN", "FR", {"cat": "chat"})
    assert [g.glossary_id for g in client.list_multilingual_glossaries()] == [glossary.glossary_id, single.glossary_id]
    assert [g.glossary_id for g in client.list_glossaries()] == [single.glossary_id]
    with pytest.raises(deepl.DeepLException, match="use /v3/glossaries"):
        client.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):  # another tenant's glossary is nobody's
        deepl.DeepLClient(door.key(), server_url=door.url).get_multilingual_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="a second dictionary for EN -> DE"):
        client.create_multilingual_glossary(
            "twice",
            [
                MultilingualGlossaryDictionaryEntries("EN", "DE", {"a": "b"}),
                MultilingualGlossaryDictionaryEntries("EN-GB", "DE", {"c": "d"}),
            ],
        )

    client.delete_multilingual_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(glossary.glossary_id)
    assert [g.glossary_id for g in client.list_multilingual_glossaries()] == [single.glossary_id]


def test_bad_glossary_entries_are_refused_naming_the_line(door: Door) -> None:
    translator = door.translator()
    with pytest.raises(deepl.DeepLException, match="line 3: source term 'cat' is given twice"):
        translator.create_glossary_from_csv("dup", "EN", "DE", "cat,Katze\ndog,Hund\ncat,Kater\n")
    assert translator.list_glossaries() == []


def test_terms_of_1024_bytes_and_a_glossary_of_10_mib_are_taken(door: Door) -> None:
    """Issue 49: terms over 200 characters were refused (Weblate then lost every suggestion of the project); DeepL
    takes terms of 1,024 UTF-8 bytes and glossaries of 10 MiB."""
    translator = door.translator()
    long_source = "the " + "long " * 204  # 1,024 bytes
    umlauts = "ü" * 512  # 512 characters, 1,024 bytes
    glossary = translator.create_glossary("long terms", "EN", "DE", {long_source.strip(): umlauts, "cat": "Katze"})
    assert glossary.entry_count == 2
    used = translator.translate_text(
        f"We saw {long_source}today.", source_lang="EN", target_lang="DE", glossary=glossary
    )
    assert isinstance(used, deepl.TextResult) and f"={umlauts}" in used.text  # the job carried the long term
    with pytest.raises(deepl.DeepLException, match=r"line 1: the target term is 1,026 bytes \(UTF-8\); at most 1,024"):
        translator.create_glossary("too long", "EN", "DE", {"cat": "ü" * 513})

    # 5,000 entries of about 2 KB: 10 MB of entries, under DeepL's 10 MiB (10,485,760 bytes); the SDK's JSON escapes
    # each "ü" as \u00fc, so the body is twice the API's default limit of a body
    big = {f"term{n:05d} " + "x" * 1_000: "ü" * 500 for n in range(5_000)}
    assert 10_000_000 < sum(len(s) + len(t.encode()) + 2 for s, t in big.items()) < 10 * 1024 * 1024
    stored = translator.create_glossary("big", "EN", "DE", big)
    assert stored.entry_count == 5_000
    found = translator.translate_text("See term00042.", source_lang="EN", target_lang="DE", glossary=stored)
    assert isinstance(found, deepl.TextResult) and found.text == "See term00042."  # a term's beginning is not the term
    over = {**big, **{f"more{n:05d} " + "x" * 1_000: "ü" * 500 for n in range(300)}}
    with pytest.raises(deepl.DeepLException, match=r"over the 10,485,760 \(10 MiB\) a glossary may hold"):
        translator.create_glossary("too big", "EN", "DE", over)
    assert [g.name for g in translator.list_glossaries()] == ["long terms", "big"]


def test_html_and_xml_tags_come_back_intact(door: Door) -> None:
    translator = door.translator()
    html = '<p>Click <a href="/docs?a=1&amp;b=2">here</a> to <b>open</b> it.<br>Now <code>x</code>.</p>'
    result = translator.translate_text(html, source_lang="EN", target_lang="DE", tag_handling="html")
    assert isinstance(result, deepl.TextResult) and result.text == html
    xml = "<doc><title>Report</title><keep>do not touch</keep> and <t/> more</doc>"
    kept = translator.translate_text(
        xml, source_lang="EN", target_lang="DE", tag_handling="xml", ignore_tags=["keep"], formality="more"
    )
    assert isinstance(kept, deepl.TextResult) and kept.text == xml.replace("</doc>", "</doc> [formal]")


def test_the_history_shows_a_tagged_text_as_the_client_sent_it(door: Door) -> None:
    """Issue 49: a ``tag_handling`` job showed dragoman's placeholders (``<x1>…``) in the console's history and
    ``GET /v1/jobs/{id}``; they show the client's markup now, and the markup kept is not the tenant's metadata."""
    key = door.key()
    translator = door.translator(key)
    html = '<p>Click <a href="/docs?a=1&amp;b=2">here</a> to <b>open</b> it.<br>Now <code>x</code>.</p>'
    result = translator.translate_text(html, source_lang="EN", target_lang="DE", tag_handling="html")
    assert isinstance(result, deepl.TextResult) and result.text == html
    headers = {"Authorization": f"Bearer {key}"}
    (listed,) = httpx.get(f"{door.url}/v1/jobs", headers=headers).json()["data"]
    assert (listed["text"], listed["translation"], listed["metadata"]) == (html, html, {})
    one = httpx.get(f"{door.url}/v1/jobs/{listed['id']}", headers=headers).json()
    assert (one["text"], one["translation"], one["metadata"]) == (html, html, {})


def test_a_document_round_trips_with_its_structure(door: Door, tmp_path: Path) -> None:
    translator = door.translator()
    handle = translator.translate_document_upload(
        TRICKY_MARKDOWN.encode(), filename="guide.md", source_lang="EN", target_lang="DE"
    )
    assert handle.document_id and handle.document_key
    with pytest.raises(deepl.DeepLException, match="document_key does not match"):
        translator.translate_document_get_status(deepl.DocumentHandle(handle.document_id, "0" * 64))
    with pytest.raises(deepl.DeepLException, match="document_key does not match"):  # bound to the uploading key
        door.translator().translate_document_get_status(handle)

    status = translator.translate_document_get_status(handle)
    assert status.status.value in ("queued", "translating", "done")
    _orchestrate_until_done(translator, handle)
    out = io.BytesIO()
    translator.translate_document_download(handle, out)
    assert out.getvalue().decode() == TRICKY_MARKDOWN  # the echo engine: the structure and the text, unchanged


def test_a_document_s_segments_carry_its_formality_and_glossary(door: Door) -> None:
    translator = door.translator()
    glossary = translator.create_glossary("pets", "EN", "DE", {"cat": "Katze", "bird": "Vogel"})
    handle = translator.translate_document_upload(
        b"# My cat\n\nThe cat sleeps.\n",
        filename="pets.md",
        source_lang="EN",
        target_lang="DE",
        formality="more",
        glossary=glossary,
    )
    _orchestrate_until_done(translator, handle)
    out = io.BytesIO()
    translator.translate_document_download(handle, out)
    lines = out.getvalue().decode().splitlines()
    # Only the terms the document holds travel (no "bird"); every segment is formal.
    assert lines[0].startswith("# My cat [") and lines[2].startswith("The cat sleeps. ["), lines
    for line in (lines[0], lines[2]):
        assert "formal" in line and "informal" not in line and "cat=Katze" in line and "Vogel" not in line, lines


def test_a_document_without_a_source_language_is_detected(door: Door) -> None:
    """``translate_document`` without ``source_lang``: detected from the document's text, as DeepL does."""
    key = door.key()
    translator = door.translator(key)
    source = "# Merci\n\nLe chat dort sur le canapé depuis ce matin, et personne ne veut le réveiller.\n"
    handle = translator.translate_document_upload(source.encode(), filename="chat.md", target_lang="DE")
    _orchestrate_until_done(translator, handle)
    out = io.BytesIO()
    translator.translate_document_download(handle, out)
    assert out.getvalue().decode() == source
    answer = httpx.post(
        f"{door.url}/v2/document/{handle.document_id}",
        data={"document_key": handle.document_key},
        headers={"Authorization": f"DeepL-Auth-Key {key}"},
    ).json()
    assert answer["status"] == "done" and answer["detected_source_language"] == "FR", answer


def test_a_done_document_answers_its_billed_characters(door: Door) -> None:
    """DeepL's document status answers ``billed_characters`` once done (issue 49); the SDK reads it."""
    translator = door.translator()
    handle = translator.translate_document_upload(
        b"# Greeting\n\nHello there, friend.\n", filename="hi.md", source_lang="EN", target_lang="DE"
    )
    _orchestrate_until_done(translator, handle)
    status = translator.translate_document_get_status(handle)
    assert status.done and status.billed_characters == len("Greeting") + len("Hello there, friend."), status


def test_model_type_is_answered_and_norwegian_is_nb(door: Door) -> None:
    """Issue 49: ``model_type_used`` when ``model_type`` is sent, and Norwegian as DeepL's ``NB`` both ways."""
    key = door.key()
    translator = door.translator(key)
    preferred = translator.translate_text(
        "Hello", source_lang="EN", target_lang="DE", model_type="prefer_quality_optimized"
    )
    fast = translator.translate_text(
        "Hello", source_lang="EN", target_lang="DE", model_type=deepl.ModelType.LATENCY_OPTIMIZED
    )
    plain = translator.translate_text("Hello", source_lang="EN", target_lang="DE")
    assert isinstance(preferred, deepl.TextResult) and preferred.model_type_used == "quality_optimized"
    assert isinstance(fast, deepl.TextResult) and fast.model_type_used == "latency_optimized"
    assert isinstance(plain, deepl.TextResult) and plain.model_type_used is None  # not sent, not answered
    with pytest.raises(deepl.DeepLException, match="Value for 'model_type' not supported"):
        translator.translate_text("Hello", target_lang="DE", model_type="fastest")

    norwegian = "Jeg har ikke tid til å snakke med deg nå, vi sees i morgen på kontoret."
    detected = translator.translate_text(norwegian, target_lang="EN-GB")
    assert isinstance(detected, deepl.TextResult) and detected.detected_source_lang == "NB", detected
    from_nb = translator.translate_text("Hei", source_lang="NB", target_lang="DE")
    into_nb = translator.translate_text("Hello", source_lang="EN", target_lang="NB")
    assert isinstance(from_nb, deepl.TextResult) and from_nb.detected_source_lang == "NB"
    assert isinstance(into_nb, deepl.TextResult) and into_nb.text == "Hello"
    listed = httpx.get(f"{door.url}/v1/jobs", headers={"Authorization": f"Bearer {key}"}).json()["data"]
    pairs = {(job["source_lang"], job["target_lang"]) for job in listed}
    assert ("nb", "de") in pairs and ("en", "nb") in pairs, pairs  # Norwegian Bokmål, as the model is told
    assert "NB" in {language.code for language in translator.get_source_languages()}
    assert "NB" in {language.code for language in translator.get_target_languages()}


def test_usage_counts_this_month_s_characters(door: Door) -> None:
    translator = door.translator()
    assert translator.get_usage().character.count == 0
    translator.translate_text(["Hello there", "friend"], source_lang="EN", target_lang="DE")
    usage = translator.get_usage()
    assert usage.character.count == 17 and usage.character.limit == 1_000_000_000_000
    assert not usage.any_limit_reached


def test_languages(door: Door) -> None:
    translator = door.translator()
    sources = {language.code: language for language in translator.get_source_languages()}
    targets = {language.code: language for language in translator.get_target_languages()}
    assert sources["EN"].name == "English" and "EN-US" not in sources
    assert targets["EN-US"].supports_formality is False and targets["DE"].supports_formality is True
    assert {"PT-BR", "ZH-HANS", "ZH-HANT"} <= set(targets)


def test_a_bad_key_is_an_authorization_error(door: Door) -> None:
    with pytest.raises(deepl.AuthorizationException, match="this API key is not valid"):
        door.translator("not-a-key").get_usage()


def test_a_bad_target_is_refused_with_dragoman_s_message(door: Door) -> None:
    with pytest.raises(deepl.DeepLException, match=r"Bad request.*'target_lang' not supported.*unknown language code"):
        door.translator().translate_text("Hello", target_lang="XX")


def test_a_text_with_no_language_to_detect_is_translated_not_refused(door: Door) -> None:
    """Before issue 49 these were 400s ("could not be told with confidence"); DeepL answers them, and so does this."""
    results = door.translator().translate_text(["zq", "12345", "🙂"], target_lang="DE")
    assert [r.text for r in results] == ["zq", "12345", "🙂"]
    assert {r.detected_source_lang for r in results} == {"EN"}  # nothing tells otherwise: the default


def _jobs_made(door: Door, key: str) -> list[str]:
    """The translations of the stand-alone jobs ``key``'s tenant has made (its history, newest first; the echo
    engine's translation is the text)."""
    listed = httpx.get(f"{door.url}/v1/jobs", params={"limit": 100}, headers={"Authorization": f"Bearer {key}"})
    assert listed.status_code == 200, listed.text
    return [job["translation"] for job in listed.json()["data"]]


def test_an_empty_string_in_a_batch_is_answered_empty_with_no_job(door: Door) -> None:
    """Issue 49: one empty string refused the whole request (400 "item 1: text is empty"); DeepL answers it ``""``."""
    key = door.key()
    translator = door.translator(key)
    results = translator.translate_text(["Hello there, friend.", "", "Goodbye!", "  "], target_lang="DE")
    assert [r.text for r in results] == ["Hello there, friend.", "", "Goodbye!", "  "]
    # a blank text is in the language of the request's others; it bills what was sent
    assert [r.detected_source_lang for r in results] == ["EN"] * 4
    assert [r.billed_characters for r in results] == [20, 0, 8, 2]
    assert sorted(_jobs_made(door, key)) == ["Goodbye!", "Hello there, friend."]  # no job for the blank ones

    # a request of only empty strings: answered, nothing queued
    only_empty = translator.translate_text(["", ""], source_lang="FR", target_lang="DE")
    assert [(r.text, r.detected_source_lang, r.billed_characters) for r in only_empty] == [("", "FR", 0)] * 2
    assert translator.translate_text([""], target_lang="DE")[0].detected_source_lang == "EN"  # the default language
    assert len(_jobs_made(door, key)) == 2

    # a refused text beside blank ones refuses the request before anything is queued (NUL: at the form's read)
    answer = httpx.post(
        f"{door.url}/v2/translate",
        data={"text": ["", "fine", "a\u0000b"], "source_lang": "EN", "target_lang": "DE"},
        headers={"Authorization": f"DeepL-Auth-Key {key}"},
    )
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_value", answer.text
    assert "form field text" in answer.json()["message"]
    assert len(_jobs_made(door, key)) == 2


ARTICLE = "\n\n".join(
    f"Paragraph {n}. The committee met on Tuesday to discuss the budget. Everyone agreed that the plan was sound, "
    "and the meeting ended early." * 3
    for n in range(180)
)
"""An article of about 60,000 characters: six times DRAGOMAN_MAX_TEXT_CHARS, under half of DeepL's request limit."""


def test_one_text_may_be_as_long_as_deepl_s_request_limit(door: Door) -> None:
    """Issue 49: a text over 10,000 characters was refused (400); DeepL limits the request to 128 KiB, not a text."""
    assert 50_000 < len(ARTICLE) < 128 * 1024
    translator = door.translator()
    result = translator.translate_text(ARTICLE, source_lang="EN", target_lang="DE")
    assert isinstance(result, deepl.TextResult)
    assert result.text == ARTICLE and result.billed_characters == len(ARTICLE)  # the worker's pieces, joined
    page = "<html><body>" + "".join(
        f"<p>Read <b>part {n}</b> of the <a href='/x/{n}'>guide</a>.</p>" for n in range(900)
    )
    page += "</body></html>"
    assert len(page) > 40_000
    html = translator.translate_text(page, source_lang="EN", target_lang="FR", tag_handling="html")
    assert isinstance(html, deepl.TextResult) and html.text == page
    # 70,000 two-byte characters: fewer characters than the limit, more bytes (DeepL counts the request's bytes)
    umlauts = ["ü" * 35_000, "ä" * 35_000]
    headers = {"Authorization": f"DeepL-Auth-Key {door.key()}"}
    refused = httpx.post(
        f"{door.url}/v2/translate", json={"text": umlauts, "target_lang": "DE"}, headers=headers, timeout=None
    )
    assert refused.status_code == 413, refused.text[:300]
    assert "Request Entity Too Large" in refused.json()["message"] and "131,072 bytes" in refused.json()["message"]
    with pytest.raises(deepl.DeepLException, match="Request Entity Too Large"):
        translator.translate_text([ARTICLE, ARTICLE, ARTICLE], source_lang="EN", target_lang="DE")


def test_bearer_and_the_legacy_auth_key_field_are_taken_too(door: Door) -> None:
    key = door.key()
    with httpx.Client(base_url=door.url, timeout=None) as http:
        bearer = http.post(
            "/v2/translate",
            json={"text": ["Hi"], "target_lang": "DE", "source_lang": "EN"},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert bearer.status_code == 200 and bearer.json()["translations"][0]["text"] == "Hi", bearer.text
        form = http.post(
            "/v2/translate", data={"auth_key": key, "text": ["a", "b"], "source_lang": "EN", "target_lang": "DE"}
        )
        assert form.status_code == 200, form.text
        assert [t["text"] for t in form.json()["translations"]] == ["a", "b"]
        refused = http.post("/v2/translate", data={"auth_key": "nope", "text": "a", "target_lang": "DE"})
        assert refused.status_code == 403 and "not valid" in refused.json()["message"]
        missing = http.get("/v2/usage")
        assert missing.status_code == 403 and missing.json()["code"] == "missing_api_key"


def test_weblate_s_deepl_backend_request_shapes(door: Door) -> None:
    """What weblate/machinery/deepl.py sends: query-string languages, JSON translate with its <x id=".."/> marks."""
    headers = {"Authorization": f"DeepL-Auth-Key {door.key()}"}
    with httpx.Client(base_url=f"{door.url}/v2/", headers=headers, timeout=None) as http:
        targets = http.get("languages", params={"type": "target"}).json()
        assert {"language": "DE", "name": "German", "supports_formality": True} in targets
        assert "EN" in {item["language"] for item in http.get("languages", params={"type": "source"}).json()}
        texts = ['Hello <x id="0"></x> world', 'Open the <x id="7"></x> file']
        params = {
            "text": texts,
            "source_lang": "EN",
            "target_lang": "DE",
            "formality": "default",
            "tag_handling": "xml",
            "ignore_tags": ["x"],
        }
        translated = http.post("translate", json=params)
        assert translated.status_code == 200, translated.text
        assert [item["text"] for item in translated.json()["translations"]] == texts
        entries = "cat\tKatze\ndog\tHund"
        glossary = {"name": "weblate:1", "source_lang": "EN", "target_lang": "DE", "entries": entries}
        created = http.post("glossaries", json={**glossary, "entries_format": "tsv"})
        assert created.status_code == 201, created.text
        listed = http.get("glossaries").json()["glossaries"]
        assert [(g["name"], g["source_lang"], g["target_lang"]) for g in listed] == [("weblate:1", "en", "de")]
        pairs = http.get("glossary-language-pairs").json()["supported_languages"]
        assert {"source_lang": "en", "target_lang": "de"} in pairs
        assert http.delete(f"glossaries/{created.json()['glossary_id']}").status_code == 204
        assert http.delete(f"glossaries/{created.json()['glossary_id']}").status_code == 404


def test_the_guide_s_sdk_example_runs(door: Door, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/guides/deepl-api.md's Python example, run as written but for its key and server URL."""
    example = next(block for block in blocks(ROOT / "docs/guides/deepl-api.md") if block.kind == "python")
    code = example.code.replace("<dragoman key>", door.key()).replace("http://127.0.0.1:8000", door.url)
    (tmp_path / "guide.md").write_text("# Guide\n\nRead *this* first.\n")
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(code, str(example.where), "exec"), {})
        except BaseException as exc:  # reported on the test's thread
            failure.append(exc)

    # The document's split and assembly are the orchestrator's: it runs here while the example waits.
    thread = threading.Thread(target=run)
    thread.start()

    def finished() -> bool:
        run_orchestrator()
        return not thread.is_alive()

    wait_for(finished, "the example finished", every=ORCHESTRATE_EVERY_S)
    assert not failure, failure
    assert (tmp_path / "guide.de.md").read_text() == "# Guide\n\nRead *this* first.\n"
    lines = printed.getvalue().splitlines()
    assert lines[0] == "The weather is lovely today, so we walk to the park. [formal] EN"
    assert lines[1] == "Usage this billing period:"
    counted, limit = re.fullmatch(r"Characters: (\d+) of (\d+)", lines[2]).groups()  # type: ignore[union-attr]
    texts = "The weather is lovely today, so we walk to the park." + "Open the dashboard."
    assert int(counted) >= len(texts) and int(limit) == 1_000_000_000_000  # and the document's segments


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"target_lang": "DE"}, "Parameter 'text' not specified."),
        ({"text": ["a"]}, "Parameter 'target_lang' not specified."),
        ({"text": ["a"], "target_lang": "DE", "formality": "very"}, "Value for 'formality' not supported"),
        ({"text": ["a"], "target_lang": "DE", "tag_handling": "json"}, "Value for 'tag_handling' not supported"),
        ({"text": ["a"], "target_lang": "DE", "glossary_id": "g"}, "'source_lang' is required when using a glossary"),
        ({"text": [1], "target_lang": "DE"}, "Parameter 'text' must be a string or a list of strings."),
    ],
)
def test_bad_translate_requests_are_400_with_deepl_s_error_shape(
    door: Door, body: dict[str, object], message: str
) -> None:
    headers = {"Authorization": f"DeepL-Auth-Key {door.key()}"}
    answer = httpx.post(f"{door.url}/v2/translate", json=body, headers=headers, timeout=None)
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["message"] and set(answer.json()) == {"message", "code"}


def test_the_key_s_queued_job_limit_is_a_bad_request_not_a_422(door: Door) -> None:
    tenant = f"deepl-{uuid.uuid4().hex[:8]}"
    key = door.loop.run(door.keys.create(f"{tenant}-{door.key_prefix}", tenant=tenant, max_queued_jobs=2))[1]
    with pytest.raises(deepl.DeepLException, match=r"Bad request.*limit"):
        door.translator(key).translate_text(["one", "two", "three"], source_lang="EN", target_lang="DE")
