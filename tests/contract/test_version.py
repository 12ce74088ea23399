"""dragoman's version: the package metadata's, which is pyproject.toml's."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import pytest

from contract import version as version_module
from contract.version import UNKNOWN_VERSION, dragoman_version

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_version_is_the_projects() -> None:
    assert dragoman_version() == tomllib.loads(PYPROJECT.read_text())["project"]["version"]


def test_a_bare_source_tree_says_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(version_module, "version", not_installed)
    assert dragoman_version() == UNKNOWN_VERSION
