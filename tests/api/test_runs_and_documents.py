"""Native runs and documents over HTTP: a real worker (deterministic engine), Redis, PostgreSQL, the RQ tasks."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import redis

from broker.keys import RedisKeys
from contract.ids import job_id_for
from contract.settings import Settings
from storage import GroupStore
from tests import waiting
from tests.api.conftest import KeyMaker, bearer
from tests.orchestrator.office_files import make_pptx
from tests.orchestrator.test_document_formats import make_docx
from tests.orchestrator.test_runs_and_documents import ORCHESTRATE_EVERY_S, _shout_or_lose, run_orchestrator
from tests.orchestrator.test_segmenting import TRICKY_HTML, TRICKY_MARKDOWN
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def error_code(response: httpx.Response, status: int) -> tuple[str, str]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    return str(error["code"]), str(error["message"])


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Run the orchestrator (on this thread) between looks at ``check()`` until it is true, however long that takes."""

    async def orchestrated() -> bool:
        run_orchestrator()
        return await check()

    await waiting.until(orchestrated, what, every=ORCHESTRATE_EVERY_S)


async def translated_upload(
    http: httpx.AsyncClient,
    key: str,
    start_worker: WorkerFactory,
    filename: str,
    data: bytes,
    engine: DeterministicEngine,
) -> httpx.Response:
    """Upload ``data`` as ``filename`` (en to fr) and work it with ``engine`` until assembled; its content (200)."""
    params = {"source_lang": "en", "target_lang": "fr", "filename": filename}
    response = await http.post("/v1/documents", params=params, content=data, headers=bearer(key))
    assert response.status_code == 202, response.text
    document_id = response.json()["id"]

    async def assembled() -> bool:
        view = (await http.get(f"/v1/documents/{document_id}", headers=bearer(key))).json()
        return bool(view["status"] == "completed")

    async with start_worker(engine):
        await until(assembled, "the document completed")
    content = await http.get(f"/v1/documents/{document_id}/content", headers=bearer(key))
    assert content.status_code == 200
    return content


async def _streamed(lines: list[dict[str, Any]]) -> Any:
    """The body as an async stream of small pieces (chunked transfer, not one buffer)."""
    data = jsonl(lines)
    for start in range(0, len(data), 1_000):
        yield data[start : start + 1_000]


async def test_a_run_goes_in_streamed_and_comes_back_in_input_order(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GroupStore, "results_page", 7)  # many pages, each its own query
    key = tenant_key("acme")
    lines = [{"custom_id": f"c{i}", "text": f"Line {i}.", "metadata": {"n": i}} for i in range(300)]
    lines[7]["target_lang"] = "de"
    response = await http.post(
        "/v1/runs?source_lang=en&target_lang=fr&name=catalogue",
        content=_streamed(lines),
        headers={**bearer(key), "Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 202, response.text
    run = response.json()
    assert run["kind"] == "run" and run["name"] == "catalogue" and run["counts"]["total"] == 300
    assert run["status"] == "running" and run["counts"]["pending"] == 300
    results = await http.get(f"/v1/runs/{run['id']}/results", headers=bearer(key))
    code, message = error_code(results, 409)
    assert code == "not_finished" and "partial=true" in message

    async def finished() -> bool:
        current = (await http.get(f"/v1/runs/{run['id']}", headers=bearer(key))).json()
        return bool(current["status"] == "completed")

    async with start_worker(DeterministicEngine()):
        await until(finished, "the run completed")
    status = (await http.get(f"/v1/runs/{run['id']}", headers=bearer(key))).json()
    assert status["counts"]["succeeded"] == 300 and status["counts"]["percent"] == 100.0
    async with http.stream("GET", f"/v1/runs/{run['id']}/results", headers=bearer(key)) as streamed:
        assert streamed.headers["content-type"] == "application/x-ndjson"
        got = [json.loads(line) async for line in streamed.aiter_lines() if line]
    assert [line["custom_id"] for line in got] == [f"c{i}" for i in range(300)]
    assert got[3] == {
        "custom_id": "c3",
        "status": "succeeded",
        "translation": "Line 3.",
        "metadata": {"n": 3},
        "quality_flags": {},
    }
    # The upload was a temporary file: nothing of it is left in the tenant's files.
    files = (await http.get("/v1/files", headers=bearer(key))).json()
    assert files["data"] == []


async def test_a_bad_run_names_every_bad_line_and_queues_nothing(
    http: httpx.AsyncClient, tenant_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    body = (
        jsonl([{"custom_id": "a", "text": "ok"}])
        + b"not json\n"
        + jsonl([{"custom_id": "a", "text": "again"}, {"custom_id": "b", "text": " "}])
        + b"\xff\xfe\n"
    )
    response = await http.post("/v1/runs?source_lang=en&target_lang=fr", content=body, headers=bearer(tenant_key("x")))
    code, message = error_code(response, 422)
    assert code == "invalid_run_file"
    assert "line 2: not JSON" in message and "line 3: custom_id 'a' already used on line 1" in message
    assert "line 4 (b)" in message and "line 5: not UTF-8" in message
    assert raw_redis.exists(RedisKeys.from_settings(settings).jobs_stream) == 0


@pytest.mark.parametrize(
    ("query", "body", "code"),
    [
        ("source_lang=en&target_lang=fr", b"", "invalid_run_file"),
        ("source_lang=en", jsonl([{"custom_id": "a", "text": "t"}]), "invalid_run_file"),
        (
            "source_lang=en&target_lang=xx-not-a-language",
            jsonl([{"custom_id": "a", "text": "t"}]),
            "unsupported_language",
        ),
        ("source_lang=en&target_lang=fr&callback_url=ftp://x", jsonl([{"custom_id": "a", "text": "t"}]), "invalid_job"),
    ],
)
async def test_run_input_errors(
    http: httpx.AsyncClient, tenant_key: KeyMaker, query: str, body: bytes, code: str
) -> None:
    response = await http.post(f"/v1/runs?{query}", content=body, headers=bearer(tenant_key("x")))
    assert error_code(response, 422)[0] == code


async def test_an_oversized_run_is_refused_while_streaming(
    settings: Settings, tenant_key: KeyMaker, raw_redis: redis.Redis
) -> None:
    from api import create_app

    app = create_app(settings.model_copy(update={"max_file_bytes": 10_000}))
    lines = [{"custom_id": str(i), "text": "x" * 50} for i in range(1_000)]
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            response = await http.post(
                "/v1/runs?source_lang=en&target_lang=fr", content=_streamed(lines), headers=bearer(tenant_key("x"))
            )
    assert error_code(response, 413)[0] in ("body_too_large", "file_too_large")
    assert raw_redis.exists(RedisKeys.from_settings(settings).jobs_stream) == 0


async def test_cancel_a_run_and_another_tenant_sees_nothing(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    acme, globex = tenant_key("acme"), tenant_key("globex")
    lines = [{"custom_id": str(i), "text": f"t {i}"} for i in range(40)]
    run = (await http.post("/v1/runs?source_lang=en&target_lang=fr", content=jsonl(lines), headers=bearer(acme))).json()
    for method, path in [
        ("GET", f"/v1/runs/{run['id']}"),
        ("GET", f"/v1/runs/{run['id']}/results?partial=true"),
        ("POST", f"/v1/runs/{run['id']}/cancel"),
    ]:
        response = await http.request(method, path, headers=bearer(globex))
        assert error_code(response, 404)[0] == "job_not_found", path
    cancelled = (await http.post(f"/v1/runs/{run['id']}/cancel", headers=bearer(acme))).json()
    assert cancelled["id"] == run["id"]

    async def done() -> bool:
        return bool((await http.get(f"/v1/runs/{run['id']}", headers=bearer(acme))).json()["status"] == "cancelled")

    async with start_worker(DeterministicEngine()):
        await until(done, "the run cancelled")
    results = await http.get(f"/v1/runs/{run['id']}/results", headers=bearer(acme))
    assert [json.loads(line)["status"] for line in results.text.splitlines()] == ["cancelled"] * 40
    assert error_code(await http.get("/v1/runs/not-a-uuid", headers=bearer(acme)), 404)[0] == "job_not_found"


@pytest.mark.parametrize(
    ("source", "how"),
    [
        (TRICKY_MARKDOWN, {"headers": {"Content-Type": "text/markdown"}}),
        (TRICKY_HTML, {"params": {"filename": "page.html"}}),
        ("One.\n\nTwo lines\nhere.\n", {"params": {"format": "txt"}}),
    ],
)
async def test_a_document_round_trips_with_its_structure(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory, source: str, how: dict[str, Any]
) -> None:
    key = tenant_key("acme")
    headers = {**bearer(key), **how.get("headers", {})}
    params = {"source_lang": "en", "target_lang": "fr", "max_segment_chars": 60, **how.get("params", {})}
    response = await http.post("/v1/documents", params=params, content=source.encode(), headers=headers)
    assert response.status_code == 202, response.text
    document = response.json()
    assert document["kind"] == "document" and document["status"] == "splitting"
    early = await http.get(f"/v1/documents/{document['id']}/content", headers=bearer(key))
    assert error_code(early, 409)[0] == "not_finished"

    async def assembled() -> bool:
        view = (await http.get(f"/v1/documents/{document['id']}", headers=bearer(key))).json()
        return bool(view["status"] == "completed")

    async with start_worker(DeterministicEngine()):
        await until(assembled, "the document completed")
    view = (await http.get(f"/v1/documents/{document['id']}", headers=bearer(key))).json()
    assert view["failed_segments"] == [] and view["format"] in ("md", "html", "txt")
    content = await http.get(f"/v1/documents/{document['id']}/content", headers=bearer(key))
    assert content.status_code == 200
    assert content.text == source.replace('<html lang="en">', '<html lang="fr">')  # the lang names the target
    assert content.headers["content-type"].startswith(
        {"md": "text/markdown", "html": "text/html"}.get(view["format"], "text/plain")
    )
    # A translated HTML page never runs as this origin's page (the console's): sandboxed, never sniffed.
    assert content.headers["content-security-policy"] == "sandbox"
    assert content.headers["x-content-type-options"] == "nosniff"
    # Its segments are the tenant's jobs: the owner looks them up (and the queued-job limit counted them).
    segment = await http.get(f"/v1/jobs/{job_id_for(document['id'], 0)}", headers=bearer(key))
    assert segment.status_code == 200 and segment.json()["status"] == "succeeded", segment.text
    other = await http.get(f"/v1/documents/{document['id']}/content", headers=bearer(tenant_key("globex")))
    assert error_code(other, 404)[0] == "job_not_found"


async def test_a_document_without_source_lang_is_detected_and_shows_its_language(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    source = "# Hola\n\nEl gato duerme en el sofá desde esta mañana y nadie en la casa quiere despertarlo.\n"
    response = await http.post(
        "/v1/documents",
        params={"target_lang": "fr", "filename": "gato.md"},
        content=source.encode(),
        headers=bearer(key),
    )
    assert response.status_code == 202, response.text
    document = response.json()
    assert document["detected_source_lang"] is None  # not split yet

    async def assembled() -> bool:
        view = (await http.get(f"/v1/documents/{document['id']}", headers=bearer(key))).json()
        return bool(view["status"] == "completed")

    async with start_worker(DeterministicEngine()):
        await until(assembled, "the document completed")
    view = (await http.get(f"/v1/documents/{document['id']}", headers=bearer(key))).json()
    assert view["detected_source_lang"] == "es" and view["failed_segments"] == []
    listed = (await http.get("/v1/documents", headers=bearer(key))).json()["data"]  # the console's history
    assert [(doc["id"], doc["detected_source_lang"]) for doc in listed] == [(document["id"], "es")]
    segment = (await http.get(f"/v1/jobs/{job_id_for(document['id'], 0)}", headers=bearer(key))).json()
    assert segment["source_lang"] == "es"  # queued with the detected language, not "auto"
    assert (await http.get(f"/v1/documents/{document['id']}/content", headers=bearer(key))).text == source


@pytest.mark.parametrize(
    ("params", "body", "headers", "status", "code"),
    [
        ({}, b"Hello.", {"Content-Type": "application/octet-stream"}, 415, "unsupported_media_type"),
        ({"format": "pdf"}, b"Hello.", {}, 422, "unsupported_format"),
        ({"format": "txt"}, b"\xff\xfe", {}, 422, "invalid_document"),
        ({"format": "txt"}, b"   \n", {}, 422, "invalid_job"),
        ({"format": "txt", "max_segment_chars": 5}, b"Hello.", {}, 422, "invalid_job"),
    ],
)
async def test_document_input_errors(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    params: dict[str, Any],
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    response = await http.post(
        "/v1/documents",
        params={"source_lang": "en", "target_lang": "fr", **params},
        content=body,
        headers={**bearer(tenant_key("x")), **headers},
    )
    assert error_code(response, status)[0] == code


async def test_a_document_over_the_limit_is_413(settings: Settings, tenant_key: KeyMaker) -> None:
    from api import create_app

    app = create_app(settings.model_copy(update={"max_document_chars": 100}))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            response = await http.post(
                "/v1/documents?source_lang=en&target_lang=fr&format=txt",
                content=b"Words. " * 30,
                headers=bearer(tenant_key("x")),
            )
    assert error_code(response, 413)[0] == "document_too_large"


async def test_cancel_a_document(http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory) -> None:
    key = tenant_key("acme")
    text = "\n\n".join(f"Paragraph {i}." for i in range(20))
    document = (
        await http.post(
            "/v1/documents?source_lang=en&target_lang=fr&format=txt", content=text.encode(), headers=bearer(key)
        )
    ).json()
    assert error_code(await http.post(f"/v1/documents/{document['id']}/cancel", headers=bearer(tenant_key("o"))), 404)
    cancelled = await http.post(f"/v1/documents/{document['id']}/cancel", headers=bearer(key))
    assert cancelled.status_code == 200, cancelled.text

    async def done() -> bool:
        view = (await http.get(f"/v1/documents/{document['id']}", headers=bearer(key))).json()
        return bool(view["status"] == "cancelled")

    async with start_worker(DeterministicEngine()):
        await until(done, "the document cancelled")
    content = await http.get(f"/v1/documents/{document['id']}/content", headers=bearer(key))
    assert error_code(content, 409)[0] == "document_not_assembled"
    assert (await http.get(f"/v1/documents/{document['id']}", headers=bearer(key))).json()["failed_segments"] is None


async def test_a_word_document_goes_up_as_bytes_and_comes_back_as_a_word_document(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    params = {"source_lang": "en", "target_lang": "fr", "filename": "report.docx"}
    content = await translated_upload(http, key, start_worker, "report.docx", make_docx(), DeterministicEngine())
    assert content.headers["content-type"] == (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    )
    translated = zipfile.ZipFile(io.BytesIO(content.content))
    original = zipfile.ZipFile(io.BytesIO(make_docx()))
    # The echoing engine leaves every text as it was: the same members with the same bytes.
    assert {n: translated.read(n) for n in translated.namelist()} == {n: original.read(n) for n in original.namelist()}
    broken = await http.post("/v1/documents", params=params, content=b"not a zip", headers=bearer(key))
    code, message = error_code(broken, 422)  # refused at upload, as the DeepL and LibreTranslate doors do
    assert code == "invalid_job" and "the .docx file is not a zip archive" in message


async def test_a_truncated_pptx_upload_is_refused_at_once(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """Not a 202 and a document that fails when it is split: the upload itself says what is wrong."""
    params = {"source_lang": "en", "target_lang": "fr", "filename": "deck.pptx"}
    deck = make_pptx()[:-40]  # no central directory
    response = await http.post("/v1/documents", params=params, content=deck, headers=bearer(tenant_key("acme")))
    code, message = error_code(response, 422)
    assert code == "invalid_job" and "the .pptx file is not a zip archive, so not a real .pptx" in message
    assert (await http.get("/v1/documents", headers=bearer(tenant_key("acme")))).json()["data"] == []


async def test_retranslate_asks_for_a_catalogues_translated_entries_too(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    catalogue = 'msgid "Open"\nmsgstr ""\n\nmsgid "Close"\nmsgstr "Fermer"\n'
    ids = []
    for retranslate in ("false", "true"):
        params = {"source_lang": "en", "target_lang": "fr", "format": "po", "retranslate": retranslate}
        response = await http.post("/v1/documents", params=params, content=catalogue.encode(), headers=bearer(key))
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])

    async def assembled() -> bool:
        views = [(await http.get(f"/v1/documents/{i}", headers=bearer(key))).json() for i in ids]
        return all(view["status"] == "completed" for view in views)

    async with start_worker(DeterministicEngine(rewrite=_shout_or_lose)):
        await until(assembled, "both catalogues completed")
    kept, again = [(await http.get(f"/v1/documents/{i}/content", headers=bearer(key))).text for i in ids]
    header = 'msgid ""\nmsgstr ""\n"Language: fr\\n"\n'  # a catalogue without a header gets one (msgfmt needs it)
    assert kept.startswith(header) and again.startswith(header)
    assert kept.endswith('\n\nmsgid "Open"\nmsgstr "OPEN"\n\nmsgid "Close"\nmsgstr "Fermer"\n')
    assert again.endswith('\n\nmsgid "Open"\nmsgstr "OPEN"\n\nmsgid "Close"\nmsgstr "CLOSE"\n')
