"""An e-book over HTTP: uploaded as bytes, translated by a real worker, downloaded as an EPUB again."""

from __future__ import annotations

import io
import zipfile

import httpx
import pytest

from contract.settings import Settings
from orchestrator.segmenting.zip_container import xml_problem
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_runs_and_documents import translated_upload, until
from tests.orchestrator.test_epub import build_epub, epub3
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


async def test_an_epub_goes_up_as_bytes_and_comes_back_as_an_epub_in_the_target_language(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    params = {"source_lang": "en", "target_lang": "fr", "filename": "garden.epub"}
    content = await translated_upload(http, key, start_worker, "garden.epub", epub3(), DeterministicEngine())
    assert content.headers["content-type"] == "application/epub+zip"
    translated = zipfile.ZipFile(io.BytesIO(content.content))
    original = zipfile.ZipFile(io.BytesIO(epub3()))
    assert translated.namelist() == original.namelist() and translated.namelist()[0] == "mimetype"
    assert translated.infolist()[0].compress_type == zipfile.ZIP_STORED
    for name in original.namelist():
        before, after = original.read(name), translated.read(name)
        if name.endswith((".xhtml", ".opf", ".ncx")):
            assert xml_problem(after) is None, name
        if name.endswith(".opf"):  # the echoing engine keeps every text; only the language changes
            assert after == before.replace(b"<dc:language>en-GB<", b"<dc:language>fr<").replace(
                b'xml:lang="en"', b'xml:lang="fr"'
            )
        elif name.endswith(".xhtml"):
            assert after == before.replace(b'lang="en"', b'lang="fr"')
        else:
            assert after == before, name
    # A zip that is no e-book is accepted as bytes; the split fails the document with the reason.
    broken = await http.post("/v1/documents", params=params, content=build_epub({}), headers=bearer(key))
    assert broken.status_code == 202, broken.text

    async def failed() -> bool:
        view = (await http.get(f"/v1/documents/{broken.json()['id']}", headers=bearer(key))).json()
        return bool(view["status"] == "failed" and "it has no META-INF/container.xml" in (view["error"] or ""))

    await until(failed, "the document failed for its missing container.xml")
