"""Connections to PostgreSQL: URL forms, the shared sync connection, the writer's async one, and outages."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from contract.errors import DragomanError

if TYPE_CHECKING:  # psycopg is imported on first use: an app that only submits never loads it
    import psycopg


class DatabaseUnavailableError(DragomanError):
    """PostgreSQL cannot be reached or refused the connection; the operation may succeed once it is back."""

    @classmethod
    def from_driver(cls, exc: BaseException) -> DatabaseUnavailableError:
        """The error for a psycopg failure, with the driver's message (or its type when it has none)."""
        return cls(str(exc).strip() or type(exc).__name__)


def libpq_url(url: str) -> str:
    """``url`` in the form psycopg/libpq accepts (drops a SQLAlchemy ``+driver`` suffix)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    return f"postgresql://{rest}" if scheme.split("+", 1)[0] in ("postgresql", "postgres") else url


def sqlalchemy_url(url: str) -> str:
    """``url`` in the form SQLAlchemy needs to use psycopg 3 (``postgresql+psycopg://``)."""
    return "postgresql+psycopg://" + libpq_url(url).partition("://")[2]


class PostgresConnection:
    """One synchronous, autocommit psycopg connection, opened on first use and reopened if closed.

    An application that only submits never touches PostgreSQL; the client's readers (jobs, runs,
    documents) share one of these. As a context manager it closes the connection on exit.
    """

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._conn: Any = None

    def get(self) -> Any:
        """The open connection."""
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._url, autocommit=True)
        return self._conn

    def close(self) -> None:
        """Close the connection if one was opened."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> PostgresConnection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


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
