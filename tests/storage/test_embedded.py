"""Embedded servers start, are found, and stop; configured URLs win over them."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
import redis

from contract.errors import ConfigurationError
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from storage.embedded import EmbeddedServices, resolve_urls


def test_embedded_services_up_find_down(tmp_path: Path) -> None:
    services = EmbeddedServices(tmp_path / "data")
    assert services.running_urls() is None
    urls = services.up()
    try:
        assert urls.redis_url.startswith("unix://")
        assert redis.Redis.from_url(urls.redis_url).ping()
        with psycopg.connect(urls.database_url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("dragoman",)
        assert services.up() == urls  # idempotent: already running
        assert services.running_urls() == urls
        assert resolve_urls(Settings(redis_url=None, database_url=None, data_dir=tmp_path / "data")) == urls
    finally:
        assert services.down() is True
    assert services.running_urls() is None
    assert services.down() is False


def test_missing_configuration_says_what_to_do(tmp_path: Path) -> None:
    settings = Settings(redis_url=None, database_url=None, data_dir=tmp_path / "nothing-here")
    with pytest.raises(ConfigurationError, match="dragoman services up"):
        resolve_urls(settings)
    with pytest.raises(ConfigurationError, match="DRAGOMAN_REDIS_URL and DRAGOMAN_DATABASE_URL"):
        Client(settings)


def test_configured_urls_are_used_without_embedded_servers(settings: Settings, service_urls: ServiceUrls) -> None:
    assert EmbeddedServices(settings.data_dir).running_urls() is None
    assert resolve_urls(settings) == service_urls
    with Client(settings) as client:
        job_id = client.submit("Hello", "en", "fr")
        assert client.get(job_id).id == job_id
