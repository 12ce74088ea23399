"""The docs examples' summary line: how many run here, run elsewhere, and are skipped (with why)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.docs.examples import examples


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run that collected the docs tests, say what became of every documented example."""
    if not any("tests/docs/" in str(item) for item in terminalreporter.stats.get("passed", [])) and not any(
        "tests/docs/" in str(item) for item in terminalreporter.stats.get("failed", [])
    ):
        return
    found = examples()
    here = sum(block.runs_here for block in found)
    elsewhere = [block for block in found if block.elsewhere]
    skipped = Counter(block.skip for block in found if block.skip)
    terminalreporter.write_line(
        f"docs examples: {len(found)} shell and Python blocks: {here} run here, {len(elsewhere)} run by "
        f"another test, {sum(skipped.values())} skipped"
    )
    for reason, count in sorted(skipped.items()):
        terminalreporter.write_line(f"  skipped {count}: {reason}")
