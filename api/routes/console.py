"""The web console: ``/`` serves its page and ``/console/<asset>`` its stylesheet, modules and vendored libraries.

The page is static (no build step, no key needed to load it); everything it shows comes from the
native API, which its scripts call with the key the user signed in with (kept in the tab's
``sessionStorage``). Every answer carries a strict Content-Security-Policy: scripts and styles
only from this server's files (no inline code), requests only to this server.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

from fastapi import APIRouter, Response

from api.errors import ApiError

router = APIRouter(tags=["console"], include_in_schema=False)

CONSOLE_DIR: Traversable = files("api") / "console"
"""Where the console's files are, inside the installed package (pyproject.toml ships them as package data)."""
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
"""The content type of each kind of file the console serves; other files (a LICENSE) are not served."""
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""No inline script or style, nothing from elsewhere; the page talks to this server only."""
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def console_assets() -> dict[str, Traversable]:
    """The files the console serves, by their path under ``/console/`` (``console.js``, ``vendor/fflate.js``)."""
    found: dict[str, Traversable] = {}
    for folder, prefix in ((CONSOLE_DIR, ""), (CONSOLE_DIR / "vendor", "vendor/")):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.is_file() and _suffix(entry.name) in CONTENT_TYPES and entry.name != "index.html":
                found[prefix + entry.name] = entry
    return found


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot >= 0 else ""


_ASSETS = console_assets()


def _file_response(entry: Traversable) -> Response:
    """The file with its content type and the console's security headers."""
    return Response(entry.read_bytes(), media_type=CONTENT_TYPES[_suffix(entry.name)], headers=_HEADERS)


@router.get("/", response_class=Response)
async def console_page() -> Response:
    """The console's page (no key needed: it asks for one, and keeps it in the tab only)."""
    return _file_response(CONSOLE_DIR / "index.html")


@router.get("/console/{asset:path}", response_class=Response)
async def console_asset(asset: str) -> Response:
    """One of the console's files; any other name is ``404 not_found`` (nothing outside the folder is reachable)."""
    entry = _ASSETS.get(asset)
    if entry is None:
        raise ApiError(404, "not_found", f"the console has no file {asset!r}")
    return _file_response(entry)
