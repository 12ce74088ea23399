"""Stores on the test database, each on a connection of its own that is closed afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from psycopg import sql

from contract.services import ServiceUrls
from storage import GroupStore, JobStore, PostgresConnection, libpq_url


@pytest.fixture
def postgres(service_urls: ServiceUrls) -> Iterator[PostgresConnection]:
    """A lazily opened connection to the test database."""
    with PostgresConnection(service_urls.database_url) as connection:
        yield connection


@pytest.fixture
def groups(postgres: PostgresConnection) -> GroupStore:
    """The runs and documents of the test database."""
    return GroupStore(postgres)


@pytest.fixture
def jobs(postgres: PostgresConnection) -> JobStore:
    """The job rows of the test database, as the client reads them."""
    return JobStore(postgres)


@pytest.fixture
def fresh_database(service_urls: ServiceUrls, pg: Any) -> Iterator[str]:
    """A brand-new empty database on the test server; dropped afterwards."""
    name = f"migr_{uuid.uuid4().hex[:12]}"
    pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(libpq_url(service_urls.database_url))
    yield urlunsplit(parts._replace(path=f"/{name}"))
    pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
