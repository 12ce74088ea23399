"""The orchestrator's tests run a real (deterministic-engine) worker too."""

import os

import pytest

from contract.settings import Settings
from tests.worker.conftest import start_worker

__all__ = ["start_worker"]


@pytest.fixture
def cluster_settings(settings: Settings) -> Settings:
    """Until the cluster launcher's fixture is on main: a Redis Cluster named by DRAGOMAN_REDIS_CLUSTER_URL."""
    url = os.environ.get("DRAGOMAN_REDIS_CLUSTER_URL")
    if not url:
        pytest.skip("no Redis Cluster: set DRAGOMAN_REDIS_CLUSTER_URL")
    return settings.model_copy(update={"redis_url": url, "redis_shards": 3})
