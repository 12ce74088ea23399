"""dragoman's own version, from the installed package's metadata (one source: ``pyproject.toml``).

Shown by ``dragoman --version``, in the worker's ``/healthz`` and in its start log line, so an
operator can tell which release a process runs.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "dragoman"
UNKNOWN_VERSION = "0+unknown"


def dragoman_version() -> str:
    """The installed ``dragoman`` distribution's version, or ``0+unknown`` when run from a bare source tree."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN_VERSION
