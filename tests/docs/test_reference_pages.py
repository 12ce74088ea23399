"""The reference pages (settings, CLI, HTTP API) are what the code makes now: a change without docs fails."""

from __future__ import annotations

import re
from pathlib import Path

from cli.reference import PAGES, REFERENCE_DIR, env_name, main, stale_pages
from contract.settings import Settings


def test_the_committed_reference_pages_are_what_the_code_makes() -> None:
    assert stale_pages() == [], "run `make reference` (python -m cli.reference) and commit docs/reference/"


def test_the_settings_table_documents_every_setting_and_nothing_else() -> None:
    page = (REFERENCE_DIR / "settings.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\| `(DRAGOMAN_[A-Z0-9_]+)` \|", page, re.MULTILINE)
    assert sorted(documented) == sorted(env_name(name) for name in Settings.model_fields)
    assert len(documented) == len(set(documented))
    for name, field in Settings.model_fields.items():
        assert field.description, f"Settings.{name} has no description for the settings reference"


def test_the_http_api_page_names_every_route_of_the_schema() -> None:
    from cli.reference import openapi_schema

    page = (REFERENCE_DIR / "http-api.md").read_text(encoding="utf-8")
    for path, methods in openapi_schema()["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in page


def test_the_cli_page_has_every_command() -> None:
    page = (REFERENCE_DIR / "cli.md").read_text(encoding="utf-8")
    commands = ("submit", "status", "cancel", "services", "run submit", "run cancel", "translate", "worker", "stats")
    for command in commands:
        assert f"## `dragoman {command}`" in page or f"### `dragoman {command}`" in page, command


def test_a_stale_page_is_found(tmp_path: Path) -> None:
    assert sorted(stale_pages(tmp_path)) == sorted(PAGES)  # none written: all stale
    for name, render in PAGES.items():
        (tmp_path / name).write_text(render(), encoding="utf-8")
    assert stale_pages(tmp_path) == []
    (tmp_path / "settings.md").write_text("| `DRAGOMAN_REDIS_URL` | ... |\n")
    assert stale_pages(tmp_path) == ["settings.md"]
    assert main(["--check"]) == 0
