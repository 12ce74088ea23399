"""The docs site builds strictly: a broken link or anchor, or a page missing from the nav, fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs.examples import ROOT


def _nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            pages += _nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = sorted(_nav_pages(config["nav"]))
    pages = sorted(path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md"))
    assert listed == pages


@pytest.mark.timeout(300)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs site needs the dev extra (mkdocs)")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").is_file()
    # ARCHITECTURE.md is included into the site, glossary and all.
    assert "One word per concept" in (tmp_path / "site" / "concepts" / "architecture" / "index.html").read_text()
