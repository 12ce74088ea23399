"""The connection limits of one ``dragoman api`` process, from its settings and its open-file limit.

Every client connection is a file descriptor, and so is every pooled connection to Redis and PostgreSQL
and every upload being spooled to a temporary file; past the process's open-file limit (``ulimit -n``)
``accept`` fails and every other client waits. :class:`ConnectionLimits` sizes the connection cap and the
requests in flight to fit under that limit, after the pools' own connections and a margin, and
:class:`LimitedConfig` is uvicorn's configuration with them in force:

- the protocols of :mod:`api.connection_guard` (the cap on connections, the deadline and size limit on
  request heads), on httptools when it is installed, else h11;
- :class:`RequestGate` in front of the application: ``503 server_busy`` with ``Retry-After`` past the
  requests in flight, ``431 header_too_large`` for a complete head over the limit;
- uvicorn's keep-alive timeout from the settings, and no WebSocket upgrades (the API has none, and an
  upgraded connection would leave the table's count).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.connection_guard import H11_BUFFER_SLACK, ConnectionTable, LimitedH11Protocol, RefusalLog
from api.errors import error_response
from contract.errors import ConfigurationError
from contract.settings import Settings

log = logging.getLogger(__name__)

SPARE_FILES = 64
"""Descriptors kept for everything else the process opens: the listening socket, standard streams, log
files, the event loop's own, DNS lookups, the orchestration queue's Redis connections."""

DERIVED_MAX_CONNECTIONS = 10_000
"""The derived connection cap's ceiling, whatever the open-file limit: each connection may hold an unfinished
head of up to ``DRAGOMAN_API_MAX_HEADER_BYTES``, so the cap bounds memory too (10,000 x 16 KiB: 160 MiB)."""

DERIVED_MAX_IN_FLIGHT = 1_024
"""The derived requests-in-flight limit's ceiling: each may be reading a body or spooling an upload."""

MAX_BACKLOG = 2_048
"""The listen queue's length at most (uvicorn's default). The event loop accepts a whole queue's worth of
connections before any of them is seen by the cap, so the queue's length is kept free under the open-file
limit too: a quarter of the room left after the pools, at most this."""

UNLIMITED_FILES = 1 << 20
"""What an unlimited open-file limit (``RLIM_INFINITY``) is taken as, and raised to at most."""

HttpImplementation = Literal["auto", "httptools", "h11"]


@dataclass(frozen=True)
class ConnectionLimits:
    """What one API process accepts at once, and how long and large a request head may be."""

    max_connections: int
    max_requests_in_flight: int
    backlog: int
    max_header_bytes: int
    header_timeout_s: float
    keep_alive_s: int
    busy_retry_after_s: int
    open_file_limit: int
    pooled_connections: int
    derived: tuple[str, ...] = ()
    """The limits worked out from the open-file limit (``max_connections``, ``max_requests_in_flight``)."""

    @classmethod
    def from_settings(cls, settings: Settings, open_file_limit: int) -> ConnectionLimits:
        """The limits of ``settings``; those left unset are derived from ``open_file_limit`` (``ulimit -n``).

        The descriptors left after the pooled connections and :data:`SPARE_FILES` are shared: a quarter
        for the listen queue (:data:`MAX_BACKLOG` at most), then half of the rest for requests in flight
        (each may hold a spooled upload's file), at most :data:`DERIVED_MAX_IN_FLIGHT`, and what remains for
        client connections, at most :data:`DERIVED_MAX_CONNECTIONS`.
        """
        pooled = pooled_connections(settings)
        room = open_file_limit - pooled - SPARE_FILES
        backlog = max(1, min(MAX_BACKLOG, room // 4))
        room -= backlog
        derived: list[str] = []
        in_flight = settings.api_max_requests_in_flight
        if in_flight is None:
            in_flight = min(DERIVED_MAX_IN_FLIGHT, room // 2)
            derived.append("max_requests_in_flight")
        connections = settings.api_max_connections
        if connections is None:
            connections = min(DERIVED_MAX_CONNECTIONS, room - in_flight)
            derived.append("max_connections")
        if connections < 1 or in_flight < 1:
            raise ConfigurationError(
                f"the open-file limit (ulimit -n) is {open_file_limit:,}: after the {pooled:,} pooled connections "
                f"to Redis and PostgreSQL and {SPARE_FILES} spare descriptors it leaves no room for client "
                "connections. Raise it (`ulimit -n 65536`, LimitNOFILE= in a systemd unit, `--ulimit nofile=` "
                "for docker), or set DRAGOMAN_API_MAX_CONNECTIONS and DRAGOMAN_API_MAX_REQUESTS_IN_FLIGHT"
            )
        return cls(
            max_connections=connections,
            max_requests_in_flight=in_flight,
            backlog=backlog,
            max_header_bytes=settings.api_max_header_bytes,
            header_timeout_s=settings.api_header_timeout_seconds,
            keep_alive_s=settings.api_keep_alive_seconds,
            busy_retry_after_s=settings.api_busy_retry_after_seconds,
            open_file_limit=open_file_limit,
            pooled_connections=pooled,
            derived=tuple(derived),
        )

    @property
    def files_needed(self) -> int:
        """Descriptors the process may need at its limits: connections, a full listen queue being accepted,
        spooled uploads, pools, spare."""
        return self.max_connections + self.backlog + self.max_requests_in_flight + self.pooled_connections + SPARE_FILES

    def describe(self) -> str:
        """One log line: every limit, and what the derived ones came from."""

        def origin(name: str) -> str:
            return " (from the open-file limit)" if name in self.derived else ""

        return (
            f"connections: at most {self.max_connections:,} open{origin('max_connections')}, "
            f"{self.max_requests_in_flight:,} requests in flight{origin('max_requests_in_flight')}, "
            f"listen queue {self.backlog:,}; "
            f"request heads at most {self.max_header_bytes:,} bytes within {self.header_timeout_s:g} s; "
            f"idle keep-alive {self.keep_alive_s} s; open-file limit {self.open_file_limit:,} "
            f"({self.pooled_connections:,} for Redis and PostgreSQL pools, {SPARE_FILES} spare)"
        )


def pooled_connections(settings: Settings) -> int:
    """Connections the API's pools may open to Redis and PostgreSQL (``api.app``'s lifespan), at most."""
    return (
        settings.api_redis_connections
        + settings.api_max_event_streams * settings.redis_shards
        + 1  # the event feed's gap checks and revocation reads
        + 2 * settings.api_database_connections  # jobs and runs; keys and batches
        + settings.api_file_store_connections
        + 1  # the readiness probe's session
    )


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (systemd's advice to programs needing many); the new soft one.

    The soft limit is often 1,024 for the sake of ``select()``, which the event loop does not use; the hard
    limit is what an administrator allowed. A refusal (some systems cap below the hard limit) keeps the soft.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNLIMITED_FILES
    target = UNLIMITED_FILES if hard == resource.RLIM_INFINITY else hard
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.info("open-file limit stays %s: raising it to %s was refused (%s)", f"{soft:,}", f"{target:,}", exc)
            return int(soft)
        return int(target)
    return int(soft)


def head_size(scope: Scope) -> int:
    """The size of a request's line and headers as they were sent (give or take the spaces around colons)."""
    size = len(scope.get("method", "")) + len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    size += len(" ? HTTP/1.1\r\n\r\n")
    for name, value in scope.get("headers", ()):
        size += len(name) + len(value) + 4
    return size


class RequestGate:
    """ASGI middleware in front of the application: the requests in flight and the size of complete heads.

    A request past ``max_requests_in_flight`` is answered ``503 server_busy`` with ``Retry-After`` before
    the application sees it; a head over ``max_header_bytes`` that arrived whole in one read (the
    protocol counts those that arrive in pieces) is answered ``431 header_too_large``, connection closed.
    Both in the error shape of the route asked for. At the lifespan's shutdown the refusals not yet logged are.
    """

    def __init__(self, app: ASGIApp, limits: ConnectionLimits, refusals: RefusalLog | None = None) -> None:
        self.app = app
        self.limits = limits
        self.refusals = refusals or RefusalLog()
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass one request, counting it while the application has it."""
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._flushing_at_shutdown(send))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        if head_size(scope) > limits.max_header_bytes:
            self.refusals.note("request heads over DRAGOMAN_API_MAX_HEADER_BYTES (431)")
            message = f"the request line and headers passed {limits.max_header_bytes:,} bytes"
            response = error_response(
                431,
                "header_too_large",
                f"{message} (DRAGOMAN_API_MAX_HEADER_BYTES)",
                {"Connection": "close"},
                request=Request(scope),
            )
            await response(scope, receive, send)
            return
        if self.in_flight >= limits.max_requests_in_flight:
            self.refusals.note("requests refused at DRAGOMAN_API_MAX_REQUESTS_IN_FLIGHT (503)")
            response = error_response(
                503,
                "server_busy",
                f"this server has its limit of {limits.max_requests_in_flight:,} requests in flight "
                "(DRAGOMAN_API_MAX_REQUESTS_IN_FLIGHT); retry shortly",
                {"Retry-After": str(limits.busy_retry_after_s)},
                request=Request(scope),
            )
            await response(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def _flushing_at_shutdown(self, send: Send) -> Send:
        """``send`` of the lifespan: the refusals counted since the last log line are logged as the server stops
        (the connections are closed by then; nothing is counted after)."""

        async def flushing_send(message: Message) -> None:
            if message["type"].startswith("lifespan.shutdown"):
                self.refusals.flush()
            await send(message)

        return flushing_send


def http_protocol(implementation: HttpImplementation = "auto") -> type[asyncio.Protocol]:
    """The limited protocol class for ``implementation`` (``auto``: httptools when installed, as uvicorn picks)."""
    if implementation == "h11":
        return LimitedH11Protocol
    try:
        from api.httptools_guard import LimitedHttpToolsProtocol
    except ImportError as exc:
        if implementation == "httptools":
            raise ConfigurationError(f"httptools is not installed ({exc}): pip install httptools, or use h11") from exc
        return LimitedH11Protocol
    return LimitedHttpToolsProtocol


class LimitedConfig(uvicorn.Config):
    """uvicorn's configuration with :class:`ConnectionLimits` in force (see the module's description).

    The other keyword arguments are uvicorn's (``host``, ``port``, ``log_config``...); ``http`` picks the
    HTTP/1.1 implementation. Serve it with ``uvicorn.Server(config)``: one config, one server.
    """

    def __init__(
        self, app: ASGIApp, limits: ConnectionLimits, *, http: HttpImplementation = "auto", **kwargs: Any
    ) -> None:
        refusals = RefusalLog()
        self.limits = limits
        self.connection_table = ConnectionTable(
            limits.max_connections,
            limits.max_header_bytes,
            limits.header_timeout_s,
            limits.busy_retry_after_s,
            refusals,
        )
        self.gate = RequestGate(app, limits, refusals)
        super().__init__(
            self.gate,
            http=http_protocol(http),
            ws="none",
            timeout_keep_alive=limits.keep_alive_s,
            backlog=limits.backlog,
            h11_max_incomplete_event_size=limits.max_header_bytes + H11_BUFFER_SLACK,
            **kwargs,
        )
