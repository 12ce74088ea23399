"""Is PostgreSQL there? The probes of ``dragoman check`` (sync) and of the worker's ``/readyz`` (async)."""

from __future__ import annotations

from storage.connection import DatabaseUnavailableError, libpq_url


def ping(database_url: str, *, connect_timeout_s: int = 5) -> None:
    """Connect and read the ``jobs`` table; raise :class:`DatabaseUnavailableError` saying why if that fails.

    Reading ``jobs`` (not just ``SELECT 1``) also catches a database the migrations never ran on.
    """
    import psycopg

    try:
        with psycopg.connect(libpq_url(database_url), connect_timeout=connect_timeout_s) as conn:
            conn.execute("SELECT 1 FROM jobs LIMIT 1")
    except psycopg.Error as exc:
        raise DatabaseUnavailableError.from_driver(exc) from exc


async def ping_async(database_url: str, *, connect_timeout_s: int = 2) -> None:
    """Connect and run ``SELECT 1`` without blocking the event loop; raise :class:`DatabaseUnavailableError` if not.

    The caller bounds the whole probe (``asyncio.timeout``); ``connect_timeout_s`` bounds libpq's connect.
    """
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(
            libpq_url(database_url), connect_timeout=connect_timeout_s, autocommit=True
        )
        async with conn:
            await conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise DatabaseUnavailableError.from_driver(exc) from exc
