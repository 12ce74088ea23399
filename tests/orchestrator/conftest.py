"""The orchestrator's tests run a real (deterministic-engine) worker too."""

import os
from pathlib import Path

import pytest

from contract.services import ServiceUrls
from contract.settings import Settings
from tests.conftest import settings_for
from tests.worker.conftest import start_worker

__all__ = ["start_worker"]


@pytest.fixture
def cluster_settings(service_urls: ServiceUrls, tmp_path: Path) -> Settings:
    """Until the cluster launcher's fixture is on main: a Redis Cluster named by DRAGOMAN_REDIS_CLUSTER_URL."""
    url = os.environ.get("DRAGOMAN_REDIS_CLUSTER_URL")
    if not url:
        pytest.skip("no Redis Cluster: set DRAGOMAN_REDIS_CLUSTER_URL")
    return settings_for(service_urls, tmp_path / "data").model_copy(update={"redis_url": url, "redis_shards": 3})
