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


def configured_servers() -> bool:
    """Whether ``DRAGOMAN_REDIS_URL`` and ``DRAGOMAN_DATABASE_URL`` are both set: a benchmark then runs on
    those servers, which are not its own to empty."""
    return bool(os.environ.get("DRAGOMAN_REDIS_URL") and os.environ.get("DRAGOMAN_DATABASE_URL"))


@contextmanager
def benchmark_servers() -> Iterator[ServiceUrls]:
    """``DRAGOMAN_REDIS_URL``/``DRAGOMAN_DATABASE_URL`` if both are set, else embedded servers in a
    temporary folder (stopped afterwards); migrated either way."""
    if configured_servers():
        urls = ServiceUrls(redis_url=os.environ["DRAGOMAN_REDIS_URL"], database_url=os.environ["DRAGOMAN_DATABASE_URL"])
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
