"""URL forms, the lazily opened asyncio connection, and the health probes."""

from __future__ import annotations

import pytest

from contract.services import ServiceUrls
from storage import DatabaseUnavailableError, libpq_url, ping, sqlalchemy_url
from storage.connection import AsyncPostgresConnection

_NOWHERE = "postgresql://dragoman@127.0.0.1:1/nothing"


@pytest.mark.parametrize(
    ("url", "libpq", "sqlalchemy"),
    [
        ("postgresql+psycopg://u:p@h:5/db", "postgresql://u:p@h:5/db", "postgresql+psycopg://u:p@h:5/db"),
        (
            "postgres://u@h/db?sslmode=require",
            "postgresql://u@h/db?sslmode=require",
            "postgresql+psycopg://u@h/db?sslmode=require",
        ),
        ("postgresql://h/db", "postgresql://h/db", "postgresql+psycopg://h/db"),
        ("host=h dbname=db", "host=h dbname=db", None),
    ],
)
def test_url_forms(url: str, libpq: str, sqlalchemy: str | None) -> None:
    assert libpq_url(url) == libpq
    if sqlalchemy is not None:
        assert sqlalchemy_url(url) == sqlalchemy


async def test_the_connection_opens_on_first_use_and_again_after_close(service_urls: ServiceUrls) -> None:
    lazy = AsyncPostgresConnection(_NOWHERE)  # nothing is opened: no error until it is used
    with pytest.raises(DatabaseUnavailableError):
        await lazy.get()

    connection = AsyncPostgresConnection(service_urls.database_url)
    first = await connection.get()
    assert await connection.get() is first and first.autocommit
    await first.close()  # closed under it (a server restart): the next get connects again
    second = await connection.get()
    assert second is not first and not second.closed
    await connection.close()
    assert second.closed
    await connection.close()  # nothing open: a no-op


async def test_ping_needs_the_schema(service_urls: ServiceUrls, fresh_database: str) -> None:
    await ping(service_urls.database_url)
    with pytest.raises(DatabaseUnavailableError, match="jobs"):
        await ping(fresh_database)  # reachable, but never migrated
    with pytest.raises(DatabaseUnavailableError) as caught:
        await ping(_NOWHERE)
    assert str(caught.value)  # the driver's reason, for /readyz
