"""A browser page on another origin may call LibreTranslate's routes (any origin by default, as LibreTranslate);
the native and DeepL routes answer no cross-origin call."""

from __future__ import annotations

import httpx
import pytest

from api import create_app
from contract.settings import Settings
from tests.api.conftest import KeyMaker

PAGE = "https://forum.example"


def _preflight(origin: str = PAGE) -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}


async def test_a_page_on_any_origin_calls_translate(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    preflight = await http.options("/translate", headers=_preflight())
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    body = {"q": "", "source": "en", "target": "de", "api_key": tenant_key("cors")}
    answered = await http.post("/translate", json=body, headers={"Origin": PAGE})
    assert answered.headers["access-control-allow-origin"] == "*"  # the page reads even an error's answer
    languages = await http.get("/languages", headers={"Origin": PAGE})
    assert languages.status_code == 200 and languages.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("path", ["/v1/jobs", "/v2/translate"])
async def test_other_routes_answer_no_cross_origin_call(http: httpx.AsyncClient, path: str) -> None:
    preflight = await http.options(path, headers=_preflight())
    assert "access-control-allow-origin" not in preflight.headers
    answered = await http.post(path, json={}, headers={"Origin": PAGE})
    assert "access-control-allow-origin" not in answered.headers


async def test_the_origins_are_a_setting(settings: Settings) -> None:
    only_forum = create_app(settings.model_copy(update={"api_cors_origins": [PAGE]}))
    none = create_app(settings.model_copy(update={"api_cors_origins": []}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=only_forum), base_url="http://api") as http:
        allowed = await http.options("/translate", headers=_preflight())
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == PAGE
        refused = await http.options("/translate", headers=_preflight("https://elsewhere.example"))
        assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=none), base_url="http://api") as http:
        closed = await http.options("/translate", headers=_preflight())
        assert "access-control-allow-origin" not in closed.headers
