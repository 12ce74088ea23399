"""PowerPoint and Excel files over HTTP: uploaded as bytes, translated by a real worker, downloaded whole."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Callable

import httpx
import pytest

from contract.documents import MEDIA_TYPES
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_runs_and_documents import translated_upload, until
from tests.orchestrator.office_files import make_pptx, make_xlsx, members
from tests.orchestrator.test_runs_and_documents import _shout_or_lose
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)
_FORMULAS = re.compile(rb"<f>.*?</f>")


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


@pytest.mark.parametrize(
    ("fmt", "make", "part", "expected"),
    [
        ("pptx", make_pptx, "ppt/slides/slide1.xml", b"<a:t>QUARTERLY RESULTS</a:t>"),
        ("xlsx", make_xlsx, "xl/sharedStrings.xml", b"<si><t>PRODUCT</t></si>"),
    ],
)
async def test_an_office_file_goes_up_as_bytes_and_comes_back_translated_and_whole(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    start_worker: WorkerFactory,
    fmt: str,
    make: Callable[[], bytes],
    part: str,
    expected: bytes,
) -> None:
    key = tenant_key("acme")
    params = {"source_lang": "en", "target_lang": "fr", "filename": f"report.{fmt}"}
    engine = DeterministicEngine(rewrite=_shout_or_lose)
    content = await translated_upload(http, key, start_worker, f"report.{fmt}", make(), engine)
    assert content.headers["content-type"] == MEDIA_TYPES[fmt]
    translated, original = members(content.content), members(make())
    assert translated.keys() == original.keys()
    for name, data in translated.items():
        if name.endswith((".xml", ".rels")):
            ElementTree.fromstring(data)  # every part still parses
        assert _FORMULAS.findall(data) == _FORMULAS.findall(original[name])  # formulas never touched
    assert expected in translated[part]
    assert zipfile.ZipFile(io.BytesIO(content.content)).testzip() is None

    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("content.xml", "<x/>")
    truncated = await http.post("/v1/documents", params=params, content=make()[:-30], headers=bearer(key))
    assert truncated.status_code == 422 and f"the .{fmt} file is not a zip archive" in truncated.text  # at once
    response = await http.post("/v1/documents", params=params, content=other.getvalue(), headers=bearer(key))
    assert response.status_code == 202  # a zip, but not this format's: the split fails the document with the reason
    broken_id = response.json()["id"]

    async def failed() -> bool:
        view = (await http.get(f"/v1/documents/{broken_id}", headers=bearer(key))).json()
        return bool(view["status"] == "failed" and f"not a .{fmt} file" in (view["error"] or ""))

    await until(failed, "the document failed as not of its format")
