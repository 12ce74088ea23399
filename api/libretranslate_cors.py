"""Cross-origin calls to the LibreTranslate routes, as LibreTranslate allows them: from any origin by default.

A web page (LibreTranslate's own front end, a forum or chat plugin running in the browser) calls
``/translate`` from its own origin; without CORS headers the browser refuses it the answer. The
origins are ``DRAGOMAN_API_CORS_ORIGINS`` (``["*"]``, LibreTranslate's default; empty: none). Only
LibreTranslate's routes answer cross-origin calls: its key travels in the body, not in cookies, so an
origin may use only the keys it holds. The native, DeepL and console routes are same-origin as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

LIBRETRANSLATE_PATHS = frozenset(
    {"/translate", "/detect", "/languages", "/translate_file", "/frontend/settings", "/suggest", "/spec"}
)
"""LibreTranslate's routes (and ``/download_file/<name>``, matched by its prefix)."""

_DOWNLOADS = "/download_file/"


def is_libretranslate_path(path: str) -> bool:
    """Whether ``path`` is one of LibreTranslate's routes on dragoman."""
    return path in LIBRETRANSLATE_PATHS or path.startswith(_DOWNLOADS)


class LibreTranslateCors:
    """ASGI middleware: Starlette's CORS handling for LibreTranslate's routes, nothing for any other."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=list(origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["*"],
            allow_credentials=False,
            max_age=600,
        )
        self.enabled = bool(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """LibreTranslate's routes through the CORS handling (preflights answered there); others straight on."""
        if self.enabled and scope["type"] == "http" and is_libretranslate_path(scope.get("path", "")):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
