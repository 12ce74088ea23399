"""The web console's files: served at ``/`` and ``/console/...`` with their types and a strict CSP; shipped."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path, PurePosixPath

import httpx
import pytest

from api.routes.console import CONSOLE_DIR, CONTENT_SECURITY_POLICY, console_assets

ROOT = Path(__file__).resolve().parents[2]


async def test_the_page_and_its_assets_are_served_with_their_types_and_the_policy(http: httpx.AsyncClient) -> None:
    page = await http.get("/")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "connect-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY and "unsafe-eval" not in CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    # Every file the page names is served, with its type (a module must be text/javascript to run).
    named = re.findall(r'(?:src|href)="(/console/[^"]+)"', page.text)
    assert "/console/console.js" in named and "/console/console.css" in named
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
    for path in [*named, "/console/api.js", "/console/vendor/fflate.js"]:
        answer = await http.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"] == types[Path(path).suffix], path
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    # No inline script or style: the policy would block it, so the page must not need it.
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text) and "<style" not in page.text
    assert " style=" not in page.text and " onclick=" not in page.text


@pytest.mark.parametrize("path", ["/console/../app.py", "/console/vendor/fflate.LICENSE", "/console/nope.js"])
async def test_nothing_else_is_served(http: httpx.AsyncClient, path: str) -> None:
    answer = await http.get(path)
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["code"] == "not_found"


def test_the_files_ship_in_the_package() -> None:
    # The package's own copy is where the route reads them (importlib.resources), and pyproject ships them.
    assert (CONSOLE_DIR / "index.html").read_text().startswith("<!doctype html>")
    assets = console_assets()
    assert {"console.js", "api.js", "console.css", "vendor/fflate.js"} <= set(assets)
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["api"]
    for name in ["index.html", *assets]:
        path = PurePosixPath("console", name)
        assert any(  # setuptools' * stays inside its folder
            path.parent == PurePosixPath(pattern).parent and fnmatch.fnmatch(path.name, PurePosixPath(pattern).name)
            for pattern in package_data
        ), f"{path} is not shipped by pyproject.toml's package-data {package_data}"
    assert (CONSOLE_DIR / "vendor" / "fflate.LICENSE").is_file()  # the vendored library's licence goes with it
