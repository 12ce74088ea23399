"""Stores on the test database, each on a connection of its own that is closed afterwards."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from psycopg import sql

from contract.services import ServiceUrls
from storage import AsyncConnectionPool, GroupStore, JobStore, libpq_url


@pytest.fixture
async def pool(service_urls: ServiceUrls) -> AsyncIterator[AsyncConnectionPool]:
    """A few connections to the test database, closed afterwards."""
    connections = AsyncConnectionPool(service_urls.database_url, max_connections=4)
    yield connections
    await connections.close()


@pytest.fixture
def groups(pool: AsyncConnectionPool) -> GroupStore:
    """The runs and documents of the test database."""
    return GroupStore(pool)


@pytest.fixture
def jobs(pool: AsyncConnectionPool) -> JobStore:
    """The job rows of the test database, as the client reads them."""
    return JobStore(pool)


@pytest.fixture
def fresh_database(service_urls: ServiceUrls, pg: Any) -> Iterator[str]:
    """A brand-new empty database on the test server; dropped afterwards."""
    name = f"migr_{uuid.uuid4().hex[:12]}"
    pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(libpq_url(service_urls.database_url))
    yield urlunsplit(parts._replace(path=f"/{name}"))
    pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
