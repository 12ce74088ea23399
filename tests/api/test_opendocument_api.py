"""OpenDocument files over HTTP: up as bytes, translated by a real worker (deterministic engine), back as the format."""

from __future__ import annotations

import io
import zipfile

import httpx
import pytest

from contract.documents import MEDIA_TYPES
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_libretranslate import _with_orchestrator, shouting
from tests.api.test_runs_and_documents import translated_upload, until
from tests.orchestrator.test_opendocument import ODP_BODY, ODS_BODY, ODT_BODY, ODT_STYLES, make_odf
from tests.orchestrator.test_runs_and_documents import _shout_or_lose
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)
FILES = {
    "odt": (make_odf("text", ODT_BODY, ODT_STYLES), "SEE THE MANUAL. IT HAS MORE.</text:p></text:note-body>"),
    "odp": (make_odf("presentation", ODP_BODY), "<text:p>MENTION THE NEW OFFICE.</text:p>"),
    "ods": (make_odf("spreadsheet", ODS_BODY), "<text:p>RENT &lt;MONTHLY&gt;</text:p>"),
}


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


@pytest.mark.parametrize("fmt", list(FILES))
async def test_an_opendocument_file_goes_up_as_bytes_and_comes_back_translated_as_that_format(
    fmt: str, http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    data, translated_text = FILES[fmt]
    engine = DeterministicEngine(rewrite=_shout_or_lose)
    content = await translated_upload(http, key, start_worker, f"report.{fmt}", data, engine)
    assert content.headers["content-type"] == MEDIA_TYPES[fmt]
    translated = zipfile.ZipFile(io.BytesIO(content.content))
    original = zipfile.ZipFile(io.BytesIO(data))
    first = translated.infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)  # as LibreOffice needs it
    assert translated_text in translated.read("content.xml").decode()
    kept = [n for n in original.namelist() if n not in ("content.xml", "styles.xml", "meta.xml")]
    assert {n: translated.read(n) for n in kept} == {n: original.read(n) for n in kept}


async def test_a_spreadsheet_sent_as_a_text_document_fails_naming_what_it_is(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    key = tenant_key("acme")
    params = {"source_lang": "en", "target_lang": "fr", "filename": "budget.odt"}
    data = make_odf("spreadsheet", ODS_BODY)
    response = await http.post("/v1/documents", params=params, content=data, headers=bearer(key))
    assert response.status_code == 202, response.text

    async def failed() -> bool:
        view = (await http.get(f"/v1/documents/{response.json()['id']}", headers=bearer(key))).json()
        error = view["error"] or ""
        return bool(view["status"] == "failed" and "is an OpenDocument spreadsheet (.ods), not a .odt" in error)

    await until(failed, "the document failed as a spreadsheet, not a text")


@pytest.mark.usefixtures("settings_env")
async def test_libretranslates_translate_file_takes_an_odt_and_its_download_is_one(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    data, translated_text = FILES["odt"]

    def upload() -> httpx.Response:
        files = {"file": ("report.odt", data, MEDIA_TYPES["odt"])}
        form = {"source": "en", "target": "fr", "api_key": key}
        return httpx.post(f"{api_url}/translate_file", files=files, data=form, timeout=None)

    async with start_worker(shouting()):
        response = await _with_orchestrator(upload)
    assert response.status_code == 200, response.text
    async with httpx.AsyncClient(timeout=None) as http:
        download = await http.get(response.json()["translatedFileUrl"], headers=bearer(key))
    assert download.status_code == 200, download.text
    assert download.headers["content-type"] == MEDIA_TYPES["odt"]
    assert translated_text in zipfile.ZipFile(io.BytesIO(download.content)).read("content.xml").decode()
