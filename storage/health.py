"""Is PostgreSQL there? The probes of ``dragoman check``, the API's ``/readyz`` and the worker's ``/readyz``."""

from __future__ import annotations

import contextlib
from typing import Any

from storage.connection import DatabaseUnavailableError, libpq_url


async def ping(database_url: str, *, connect_timeout_s: int = 2) -> None:
    """Connect and read the ``jobs`` table without blocking the event loop; :class:`DatabaseUnavailableError` if not.

    Reading ``jobs`` (not just ``SELECT 1``) also catches a database the migrations never ran on.
    The caller bounds the whole probe (``asyncio.timeout``); ``connect_timeout_s`` bounds libpq's
    connect. ``dragoman check`` runs it through ``contract.sync_bridge.run_sync``.
    """
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(
            libpq_url(database_url), connect_timeout=connect_timeout_s, autocommit=True
        )
        async with conn:
            await conn.execute("SELECT 1 FROM jobs LIMIT 1")
    except psycopg.Error as exc:
        raise DatabaseUnavailableError.from_driver(exc) from exc


PROBE_APPLICATION_NAME = "dragoman-readyz"  # the readiness connection, as pg_stat_activity shows it


class ReadinessProbe:
    """``SELECT 1`` on one kept connection, for a readiness endpoint that may be probed very often.

    Keeping the connection means a flood of probes costs the database one session, not one per
    probe. A kept connection that has gone stale (a restart, a proxy) is replaced within the same
    check; any failure closes it, so the next check starts clean.
    """

    def __init__(self, database_url: str, *, connect_timeout_s: int = 2, read_jobs: bool = False) -> None:
        # read_jobs: read the jobs table, not just SELECT 1 (a database the migrations never ran on is not ready)
        self._query = "SELECT 1 FROM jobs LIMIT 1" if read_jobs else "SELECT 1"
        self._url = libpq_url(database_url)
        self._connect_timeout_s = connect_timeout_s
        self._conn: Any = None

    async def check(self) -> None:
        """Raise :class:`DatabaseUnavailableError` saying why if PostgreSQL does not answer."""
        import psycopg

        kept = self._conn is not None and not self._conn.closed
        try:
            try:
                await self._select_one()
            except psycopg.OperationalError:
                if not kept:
                    raise
                await self._select_one()  # the kept connection had gone stale: a new one
        except (psycopg.Error, OSError) as exc:
            await self.close()  # it may be broken or mid-query: the next check opens a new one
            raise DatabaseUnavailableError.from_driver(exc) from exc
        except BaseException:  # a timeout or cancellation mid-query: never reuse that connection
            await self.close()
            raise

    async def _select_one(self) -> None:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = await psycopg.AsyncConnection.connect(
                self._url,
                connect_timeout=self._connect_timeout_s,
                autocommit=True,
                application_name=PROBE_APPLICATION_NAME,
            )
        try:
            await self._conn.execute(self._query)
        except psycopg.OperationalError:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the kept connection, if any."""
        import psycopg

        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()
