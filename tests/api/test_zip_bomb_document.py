"""A zip bomb uploaded as a ``.docx`` fails its document with the reason, naming the member (issue 33)."""

from __future__ import annotations

import httpx
import pytest

from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.orchestrator.test_zip_bomb import BOMB_MEMBER, MIB, bomb


@pytest.mark.timeout(300)
async def test_an_uploaded_zip_bomb_fails_the_document_naming_the_member(
    settings_env: Settings, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api import create_app
    from tests.api.test_runs_and_documents import until

    monkeypatch.setenv("DRAGOMAN_MAX_DOCUMENT_UNPACKED_BYTES", str(8 * MIB))  # the rq tasks read the environment
    app = create_app(settings_env)
    key = bearer(tenant_key("acme"))
    params = {"source_lang": "en", "target_lang": "fr", "filename": "bomb.docx"}
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api.test") as http:
            response = await http.post("/v1/documents", params=params, content=bomb(), headers=key)
            assert response.status_code == 202, response.text
            document_id = response.json()["id"]
            seen: dict[str, object] = {}

            async def failed() -> bool:
                seen.update((await http.get(f"/v1/documents/{document_id}", headers=key)).json())
                return seen["status"] == "failed"

            await until(failed, "the document failed")
    assert BOMB_MEMBER in str(seen["error"]) and "DRAGOMAN_MAX_DOCUMENT_UNPACKED_BYTES" in str(seen["error"])
