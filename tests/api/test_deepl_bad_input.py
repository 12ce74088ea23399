"""DeepL door refusals found by review: each is a 400 in DeepL's ``{"message"}`` shape, naming what to change."""

from __future__ import annotations

import httpx

from tests.api.conftest import KeyMaker


def _deepl(key: str) -> dict[str, str]:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


async def test_a_glossary_from_a_language_into_itself_is_refused(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """``/v2/glossary-language-pairs`` lists no such pair, and no translation could ever use it."""
    body = {"name": "same", "source_lang": "EN", "target_lang": "en-GB", "entries": "a\tb"}
    response = await http.post("/v2/glossaries", json=body, headers=_deepl(tenant_key("gl")))
    assert response.status_code == 400, response.text
    assert "same language" in response.json()["message"]


async def test_a_docx_that_is_not_a_zip_is_refused_at_upload(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """Not a document id whose status turns to error later: the upload itself says what is wrong."""
    fields = {"source_lang": "EN", "target_lang": "DE"}
    files = {"file": ("letter.docx", b"plain text, not a Word file")}
    response = await http.post("/v2/document", data=fields, files=files, headers=_deepl(tenant_key("docx")))
    assert response.status_code == 400, response.text
    assert "not a zip" in response.json()["message"]
