"""Deadlines on request bodies: a client that stops sending (or trickles forever) is answered 408.

Without them a client could hold a request open for as long as it liked, sending a byte now
and then: uvicorn has no body timeout of its own.
"""

from __future__ import annotations

import asyncio
import time

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyReadTimeout:
    """ASGI middleware: each read of the request body waits at most ``read_timeout`` seconds, and the
    whole body must have arrived ``total_timeout`` seconds after the request began.

    A late body is refused with ``408 request_timeout`` (``Connection: close``), raised from the
    body read like :class:`~api.limits.BodySizeLimit`'s 413, so the route stops before it stores
    anything and the error handlers answer in the route's shape. Once the body is complete the
    reads are left alone: a streaming response waits on them for the client's disconnect.
    """

    def __init__(self, app: ASGIApp, read_timeout: float, total_timeout: float) -> None:
        self.app = app
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wrap ``receive`` of an HTTP request with the two deadlines."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = time.monotonic() + self.total_timeout
        body_done = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            left = deadline - time.monotonic()
            wait = min(self.read_timeout, left)
            try:
                message = await asyncio.wait_for(receive(), timeout=max(wait, 0.0))
            except TimeoutError:
                raise _timed_out(self.read_timeout if wait < left else self.total_timeout, wait < left) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        await self.app(scope, timed_receive, send)


def _timed_out(seconds: float, between_reads: bool) -> HTTPException:
    what = (
        f"no part of the request body arrived for {seconds:g} s (DRAGOMAN_UPLOAD_READ_TIMEOUT_SECONDS)"
        if between_reads
        else f"the request body took longer than {seconds:g} s to arrive (DRAGOMAN_UPLOAD_TOTAL_TIMEOUT_SECONDS)"
    )
    return HTTPException(408, f"{what}; nothing was stored: send it again", headers={"Connection": "close"})
