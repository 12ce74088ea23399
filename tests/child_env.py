"""The environment of a `dragoman` child process the tests start: the test's servers and key prefix."""

from __future__ import annotations

import os

from contract.settings import Settings


def child_env(settings: Settings, **extra: str) -> dict[str, str]:
    """``os.environ`` with ``settings``' services as ``DRAGOMAN_*`` variables, quick reads, no metrics port clash."""
    assert settings.redis_url and settings.database_url
    return {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_READ_BLOCK_MS": "50",
        **extra,
    }
