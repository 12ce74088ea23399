"""URL forms, the lazily opened shared connection, and the health probes."""

from __future__ import annotations

import psycopg
import pytest

from contract.services import ServiceUrls
from storage import DatabaseUnavailableError, PostgresConnection, libpq_url, ping, sqlalchemy_url

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


def test_the_connection_opens_on_first_use_and_again_after_close(service_urls: ServiceUrls) -> None:
    lazy = PostgresConnection(_NOWHERE)  # nothing is opened: no error until it is used
    with pytest.raises(psycopg.OperationalError):
        lazy.get()

    with PostgresConnection(service_urls.database_url) as connection:
        first = connection.get()
        assert connection.get() is first and first.autocommit
        first.close()
        second = connection.get()
        assert second is not first and not second.closed
    assert second.closed


async def test_ping_needs_the_schema(service_urls: ServiceUrls, fresh_database: str) -> None:
    await ping(service_urls.database_url)
    with pytest.raises(DatabaseUnavailableError, match="jobs"):
        await ping(fresh_database)  # reachable, but never migrated
    with pytest.raises(DatabaseUnavailableError) as caught:
        await ping(_NOWHERE)
    assert str(caught.value)  # the driver's reason, for /readyz
