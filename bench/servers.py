"""The Redis and PostgreSQL a benchmark runs against: the configured ones, or fresh embedded ones."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contract.services import ServiceUrls
from storage import upgrade_database
from storage.embedded import EmbeddedServices


@contextmanager
def benchmark_servers() -> Iterator[ServiceUrls]:
    """``DRAGOMAN_REDIS_URL``/``DRAGOMAN_DATABASE_URL`` if both are set, else embedded servers in a
    temporary folder (stopped afterwards); migrated either way."""
    redis_url, database_url = os.environ.get("DRAGOMAN_REDIS_URL"), os.environ.get("DRAGOMAN_DATABASE_URL")
    if redis_url and database_url:
        urls = ServiceUrls(redis_url=redis_url, database_url=database_url)
        upgrade_database(urls.database_url)
        yield urls
        return
    services = EmbeddedServices(Path(tempfile.mkdtemp(prefix="dragoman-bench-")))
    urls = services.up()
    try:
        upgrade_database(urls.database_url)
        yield urls
    finally:
        services.down()
