"""uvicorn's httptools protocol under the connection limits of :mod:`api.connection_guard`.

Kept apart because httptools is optional (uvicorn falls back to h11 without it): importing this module
needs it. httptools buffers a header field or value of any length until it ends, and uvicorn appends to
the URL as it arrives, so the byte count after each read is what bounds an unfinished head here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from api.connection_guard import HeadGuard, connection_table


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol under the connection limits (:class:`~api.connection_guard.HeadGuard`).

    A head is in progress from the connection's opening, and after each request was received whole,
    until the parser reports the next one's headers complete.
    """

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = HeadGuard(self, connection_table(config), self.loop)
        self.head_in_progress = True

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take a place in the table (or be refused) and start the first head's deadline."""
        super().connection_made(transport)
        self.guard.opened(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        """Free the place; uvicorn's own clean-up."""
        self.guard.closed()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Count a head's bytes around uvicorn's parsing; refuse a head past its limit."""
        if not self.guard.before_read(len(data), self.head_in_progress):
            return
        super().data_received(data)
        self.guard.after_read(self.head_in_progress)

    def on_headers_complete(self) -> None:
        """The head was parsed whole: its deadline stops; then uvicorn starts the request."""
        self.head_in_progress = False
        self.guard.head_complete()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The request arrived whole: what follows on the connection is the next request's head."""
        super().on_message_complete()
        self.head_in_progress = True
        self.guard.next_head()

    def on_response_complete(self) -> None:
        """uvicorn's keep-alive and pipelining, then the connection counts as freshly idle."""
        super().on_response_complete()
        self.guard.response_complete()

    def is_idle(self) -> bool:
        """No request in flight nor queued behind one (the next request's head may be arriving)."""
        return (self.cycle is None or self.cycle.response_complete) and not self.pipeline

    def evict(self) -> None:
        """Close for a newcomer at the cap."""
        self.guard.evict()
