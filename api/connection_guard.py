"""Client connections as a resource: a cap per process, a deadline and a size limit on each request head.

uvicorn bounds none of these by itself. A connection that never sends a request is kept for ever (its
keep-alive timer starts only after a first response); httptools buffers a header of any length (four
unfinished 100 MiB headers took an API server from 290 to 682 MB, issue 48); ``limit_concurrency``
answers requests 503 but still accepts every socket, so the open-file limit is what ends a flood of idle
ones: ``accept`` fails with ``EMFILE`` and every other client waits in the listen queue (20,100 idle
sockets made every other request fail).

The protocol classes here (:class:`LimitedH11Protocol`, and ``api.httptools_guard``'s twin for httptools)
add, whichever HTTP/1.1 implementation runs:

- **a cap on open connections** (:class:`ConnectionTable`): at the cap, a new connection closes the
  connection that has been idle longest (waiting for its first request, between requests, or still
  sending a request head), as nginx reuses its keep-alive connections; only when every connection has a
  request in flight is the new one refused (``503 server_busy``, closed). Idle sockets therefore cost
  their owner its own sockets, never another client its answer;
- **a deadline on each request head**: the request line and headers must arrive within
  ``header_timeout_s`` of the connection's opening (or of the first byte of a later request on a kept-alive
  connection); past it ``408 request_timeout`` and the connection closed (closed silently if it sent
  nothing, as a keep-alive timeout does);
- **a size limit on an unfinished head**: the bytes received since the head began are counted after each
  read, and a head still unfinished past ``max_header_bytes`` is answered ``431 header_too_large`` and
  closed, so a connection holds at most the limit plus one read (256 KiB) however long its header.
  A complete head over the limit that arrived in one read is refused by ``api.server_limits.RequestGate``.

The refusals are plain JSON in the API's error shape (``{"error": {"code", "message"}}``) with
``Connection: close``; none is written while a response is still going out on the connection (a
pipelined request's head): the connection is then just closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import OrderedDict
from typing import Any, Protocol

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 60.0
"""At most one log line per this many seconds counts the connections closed or refused by the limits
(a flood of idle sockets closes thousands: one line each would flood the log instead)."""

H11_BUFFER_SLACK = 1024 * 1024
"""h11's own cap on an unfinished event (``h11_max_incomplete_event_size``) is the head limit plus this: our
count runs after every read (at most 256 KiB), so it refuses first, with 431 rather than h11's 400."""

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


class GuardedConnection(Protocol):
    """What :class:`ConnectionTable` needs of a connection: whether it is idle, and a way to close it."""

    def is_idle(self) -> bool:
        """No request in flight: waiting for its first or next request, or still receiving a request head."""
        ...

    def evict(self) -> None:
        """Close the connection at once (the table needs its place), without an answer."""
        ...


class RefusalLog:
    """Counts what the limits closed or refused; logs the counts as one line at most every minute."""

    def __init__(self, interval_s: float = REFUSAL_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.counts: dict[str, int] = {}
        self._last_logged = -math.inf
        self._flush: asyncio.TimerHandle | None = None

    def note(self, what: str) -> None:
        """Count one ``what`` (``"idle connections closed at DRAGOMAN_API_MAX_CONNECTIONS"``); log now or soon."""
        self.counts[what] = self.counts.get(what, 0) + 1
        loop = asyncio.get_running_loop()
        wait = self._last_logged + self.interval_s - loop.time()
        if wait <= 0:
            self.flush()
        elif self._flush is None:
            self._flush = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        """Log the counts since the last line (nothing if there are none)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if not self.counts:
            return
        self._last_logged = asyncio.get_running_loop().time()
        counted = ", ".join(f"{count:,} {what}" for what, count in self.counts.items())
        log.warning("connection limits: %s", counted)
        self.counts = {}


class ConnectionTable:
    """One server's open connections against its cap, oldest-idle first; and the limits on request heads.

    Each connection takes a place when it opens (:meth:`admit`) and gives it back when it closes
    (:meth:`release`); :meth:`touch` marks it fresh again when a response completes. At the cap, the
    connection touched longest ago that is idle is closed for the new one (a connection with a request in
    flight is skipped and counts as fresh), and when none is idle the new one is refused.
    """

    def __init__(
        self,
        max_connections: int,
        max_header_bytes: int,
        header_timeout_s: float,
        busy_retry_after_s: int = 1,
        refusals: RefusalLog | None = None,
    ) -> None:
        if max_connections < 1 or max_header_bytes < 1 or header_timeout_s <= 0:
            raise ValueError(
                f"connection limits must be positive: {max_connections} connections, "
                f"{max_header_bytes} header bytes, {header_timeout_s} s header timeout"
            )
        self.max_connections = max_connections
        self.max_header_bytes = max_header_bytes
        self.header_timeout_s = header_timeout_s
        self.busy_retry_after_s = busy_retry_after_s
        self.refusals = refusals or RefusalLog()
        self._open: OrderedDict[GuardedConnection, None] = OrderedDict()

    @property
    def open(self) -> int:
        """Connections holding a place now."""
        return len(self._open)

    def admit(self, connection: GuardedConnection) -> bool:
        """Give ``connection`` a place (closing the longest-idle one at the cap); False: none could be made."""
        if len(self._open) >= self.max_connections and not self._evict_one():
            self.refusals.note("connections refused at DRAGOMAN_API_MAX_CONNECTIONS, every one busy (503)")
            return False
        self._open[connection] = None
        return True

    def mark_recent(self, connection: GuardedConnection) -> None:
        """``connection`` just finished a response: it is the last to be closed for a newcomer."""
        if connection in self._open:
            self._open.move_to_end(connection)

    def release(self, connection: GuardedConnection) -> None:
        """``connection`` closed (or is closing): its place is free. Idempotent."""
        self._open.pop(connection, None)

    def _evict_one(self) -> bool:
        for _ in range(len(self._open)):
            oldest = next(iter(self._open))
            if oldest.is_idle():
                self.release(oldest)
                oldest.evict()
                self.refusals.note("idle connections closed at DRAGOMAN_API_MAX_CONNECTIONS")
                return True
            self._open.move_to_end(oldest)  # a request in flight: skipped, looked at again last
        return False


def connection_table(config: Config) -> ConnectionTable:
    """The :class:`ConnectionTable` a server's config carries (``api.server_limits.LimitedConfig``)."""
    table = getattr(config, "connection_table", None)
    if not isinstance(table, ConnectionTable):
        raise TypeError(
            "the limited HTTP protocols need a config carrying a ConnectionTable: build it with "
            "api.server_limits.server_config(app, settings)"
        )
    return table


def error_bytes(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response that closes the connection: ``{"error": {"code", "message"}}``."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    lines = [
        b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"Error")),
        b"content-type: application/json",
        b"content-length: %d" % len(body),
        b"connection: close",
        *(f"{name}: {value}".encode("latin-1") for name, value in (headers or {}).items()),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class HeadGuard:
    """One connection's place in the table, its request head's byte count and deadline.

    The protocol calls :meth:`opened` and :meth:`closed` around the connection, :meth:`before_read`
    and :meth:`after_read` around each read it parses (saying whether a request head is in progress),
    :meth:`head_complete` when a head was parsed whole and :meth:`response_complete` after each response.
    """

    def __init__(self, connection: GuardedConnection, table: ConnectionTable, loop: asyncio.AbstractEventLoop) -> None:
        self.connection = connection
        self.table = table
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.head_bytes = 0
        self.closing = False
        self._deadline: asyncio.TimerHandle | None = None

    def opened(self, transport: asyncio.Transport) -> bool:
        """The connection opened: take a place (False: refused, closed) and start the first head's deadline."""
        self.transport = transport
        if not self.table.admit(self.connection):
            retry = self.table.busy_retry_after_s
            self._answer_and_close(
                503,
                "server_busy",
                f"this server holds its limit of {self.table.max_connections:,} connections, each with a "
                "request in flight; retry shortly",
                {"retry-after": str(retry)},
            )
            return False
        self._arm()
        return True

    def closed(self) -> None:
        """The connection is gone: free its place, stop its deadline."""
        self.closing = True
        self.table.release(self.connection)
        self._disarm()

    def before_read(self, size: int, head_in_progress: bool) -> bool:
        """``size`` bytes arrived; count them if they are a request head's. False: drop them (closing)."""
        if self.closing:
            return False
        if head_in_progress:
            self._arm()
            self.head_bytes += size
        return True

    def after_read(self, head_in_progress: bool) -> None:
        """The read was parsed: a head still unfinished past the limit is refused (431) and closed."""
        if self.closing or self.transport is None or self.transport.is_closing():
            return
        if head_in_progress and self.head_bytes > self.table.max_header_bytes:
            self.table.refusals.note("request heads over DRAGOMAN_API_MAX_HEADER_BYTES (431)")
            limit = self.table.max_header_bytes
            self._answer_and_close(
                431,
                "header_too_large",
                f"the request line and headers passed {limit:,} bytes (DRAGOMAN_API_MAX_HEADER_BYTES)",
            )

    def head_complete(self) -> None:
        """A request head was parsed whole: its deadline stops; the next head counts from zero."""
        self.head_bytes = 0
        self._disarm()

    def next_head(self) -> None:
        """A request was received whole (body included): what follows is the next request's head."""
        self.head_bytes = 0

    def response_complete(self) -> None:
        """A response went out: the connection is idle again, the last in line to be closed at the cap."""
        self.table.mark_recent(self.connection)

    def evict(self) -> None:
        """Close the connection for a newcomer (the table already freed its place)."""
        self.closing = True
        self._disarm()
        if self.transport is not None:
            self.transport.close()

    def _arm(self) -> None:
        if self._deadline is None and not self.closing:
            self._deadline = self.loop.call_later(self.table.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.closing or self.transport is None or self.transport.is_closing():
            return
        if self.head_bytes == 0:  # nothing sent: closed as an idle keep-alive connection is
            self.table.refusals.note("silent connections closed at DRAGOMAN_API_HEADER_TIMEOUT_SECONDS")
            self.closing = True
            self.table.release(self.connection)
            self.transport.close()
            return
        self.table.refusals.note("request heads past DRAGOMAN_API_HEADER_TIMEOUT_SECONDS (408)")
        self._answer_and_close(
            408,
            "request_timeout",
            f"the request line and headers did not arrive within {self.table.header_timeout_s:g} s "
            "(DRAGOMAN_API_HEADER_TIMEOUT_SECONDS)",
        )

    def _answer_and_close(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        """Write the refusal (unless a response is going out: it would cut into it) and close."""
        self.closing = True
        self.table.release(self.connection)
        self._disarm()
        if self.transport is None:
            return
        if self.connection.is_idle():
            self.transport.write(error_bytes(status, code, message, headers))
        self.transport.close()


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under the connection limits (:class:`HeadGuard`): h11's head is its
    ``IDLE`` state (the request line and headers not yet parsed whole)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = HeadGuard(self, connection_table(config), self.loop)

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
        if not self.guard.before_read(len(data), self._head_in_progress()):
            return
        super().data_received(data)
        if self._head_in_progress():
            self.guard.after_read(True)
        else:
            self.guard.head_complete()

    def on_response_complete(self) -> None:
        """uvicorn's keep-alive handling, then the connection counts as freshly idle."""
        super().on_response_complete()
        self.guard.response_complete()

    def is_idle(self) -> bool:
        """No request in flight (the next request's head may be arriving)."""
        return self.cycle is None or self.cycle.response_complete

    def evict(self) -> None:
        """Close for a newcomer at the cap."""
        self.guard.evict()

    def _head_in_progress(self) -> bool:
        return self.conn.their_state is h11.IDLE
