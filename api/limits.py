"""The request-body size limit, enforced as the body arrives (not after it was read whole)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    """ASGI middleware: a body over ``max_bytes`` is refused with 413 (``body_too_large``).

    A declared ``Content-Length`` over the limit is refused at the first read; a chunked body
    is counted as it streams and refused the moment it passes the limit. The refusal is raised
    from the body read, so the error handlers answer it in the API's error shape.

    ``uploads`` gives a POST route its own limit (``/v1/files`` takes files far larger than a
    JSON body).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, uploads: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.uploads = uploads or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wrap ``receive`` of an HTTP request with the byte count."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        if scope.get("method") == "POST":
            limit = self.uploads.get(scope.get("path", ""), limit)
        declared = _content_length(scope)
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            if declared is not None and declared > limit:
                raise HTTPException(413, f"request body is {declared:,} bytes, over the limit of {limit:,}")
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, f"request body is over the limit of {limit:,} bytes")
            return message

        await self.app(scope, limited_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
