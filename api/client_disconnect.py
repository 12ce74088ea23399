"""Stop waiting for a client that has gone: the DeepL and LibreTranslate doors hold a request open while
its texts are translated, and uvicorn does not cancel a request's task when its client disconnects.

:func:`cancelled_on_disconnect` runs the wait as a task and cancels it once the server reports the
disconnect, so the wait's own cancellation handling (:func:`api.text_translation.translate_texts`
cancels its jobs, ``/translate_file`` its document) runs for an answer nobody will read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import Request

from api.errors import ApiError

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    """Return once the server reports that the client closed the connection (the body is read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def cancelled_on_disconnect(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; ``work`` is cancelled if the client disconnects first (or this request is cancelled).

    Call it only once the request's body has been read: the watch consumes what the server sends next.
    """
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})  # its own cancellation handling (its jobs cancelled) ends before this request
        raise
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ApiError(499, "client_closed_request", "the client closed the connection before the answer was ready")
    return task.result()
