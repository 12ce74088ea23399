"""Connections to PostgreSQL: URL forms, one asyncio connection, a pool of them, and outages.

Every statement of this package runs on these (one implementation per operation, async);
synchronous callers run the operations through ``contract/sync_bridge.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from contract.errors import DragomanError
from contract.overload import ServerBusyError

if TYPE_CHECKING:  # psycopg is imported on first use: an app that only submits never loads it
    import psycopg


class DatabaseUnavailableError(DragomanError):
    """PostgreSQL cannot be reached or refused the connection; the operation may succeed once it is back."""

    @classmethod
    def from_driver(cls, exc: BaseException) -> DatabaseUnavailableError:
        """The error for a psycopg failure, with the driver's message (or its type when it has none)."""
        return cls(str(exc).strip() or type(exc).__name__)


class DatabasePoolBusyError(ServerBusyError, DatabaseUnavailableError):
    """Every connection of an :class:`AsyncConnectionPool` stayed in use for its whole wait: load, not an outage.

    A :class:`DatabaseUnavailableError` too, so callers that retry when PostgreSQL is away retry
    when the pool is busy; the HTTP API answers it ``503 server_busy`` with ``Retry-After``.
    """


def libpq_url(url: str) -> str:
    """``url`` in the form psycopg/libpq accepts (drops a SQLAlchemy ``+driver`` suffix)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    return f"postgresql://{rest}" if scheme.split("+", 1)[0] in ("postgresql", "postgres") else url


def sqlalchemy_url(url: str) -> str:
    """``url`` in the form SQLAlchemy needs to use psycopg 3 (``postgresql+psycopg://``)."""
    return "postgresql+psycopg://" + libpq_url(url).partition("://")[2]


class AsyncPostgresConnection:
    """One asyncio psycopg connection (autocommit), opened on first use and after :meth:`close`.

    Owned by one task at a time (the worker's writer); after an outage, :meth:`close` drops the
    broken connection and the next :meth:`get` connects afresh.
    """

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def get(self) -> psycopg.AsyncConnection[Any]:
        """The open connection; raises :class:`DatabaseUnavailableError` if PostgreSQL cannot be reached."""
        import psycopg

        if self._conn is None or self._conn.closed:
            try:
                self._conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
            except psycopg.OperationalError as exc:
                raise DatabaseUnavailableError.from_driver(exc) from exc
        return self._conn

    async def close(self) -> None:
        """Close the connection if one is open; a connection that is already broken is just dropped."""
        import psycopg

        if self._conn is not None:
            try:
                await self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None


class AsyncConnectionPool:
    """A few asyncio psycopg connections (autocommit) shared by concurrent tasks, opened on demand.

    An HTTP server's requests look rows up at the same time; one connection would serialise them
    and a connection per request would cost a connect each. A connection that fails is dropped
    (the next use opens a new one); at most ``max_connections`` are open or in use at once.
    """

    def __init__(self, database_url: str, *, max_connections: int = 8, acquire_timeout_s: float = 10.0) -> None:
        if max_connections < 1:
            raise ValueError(f"a pool needs at least one connection, not {max_connections}")
        self._url = database_url
        self._idle: list[AsyncPostgresConnection] = []
        self._max = max_connections
        self._slots = asyncio.Semaphore(max_connections)
        self._acquire_timeout = acquire_timeout_s

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection for one unit of work; raises :class:`DatabaseUnavailableError` when PostgreSQL is down.

        Waits at most ``acquire_timeout_s`` for a free connection (in the order callers came), then
        raises :class:`DatabasePoolBusyError`: a caller answers "retry shortly" instead of queueing
        behind work that does not end.
        """
        import psycopg

        try:
            async with asyncio.timeout(self._acquire_timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise DatabasePoolBusyError("PostgreSQL", self._max, self._acquire_timeout) from None
        try:
            holder = self._idle.pop() if self._idle else AsyncPostgresConnection(self._url)
            try:
                yield await holder.get()
            except psycopg.OperationalError as exc:
                await holder.close()
                raise DatabaseUnavailableError.from_driver(exc) from exc
            except BaseException:
                await holder.close()
                raise
            self._idle.append(holder)
        finally:
            self._slots.release()

    @property
    def max_connections(self) -> int:
        """How many connections the pool opens at most."""
        return self._max

    async def close(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for holder in idle:
            await holder.close()


def create_database(admin_url: str, name: str) -> None:
    """Create database ``name`` on the server at ``admin_url`` unless it exists (the embedded server's first start)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
