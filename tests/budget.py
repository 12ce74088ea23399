"""The suite's time budget, visible in every run: ``--budget-s=900 --budget-share=fast|e2e``.

``make test`` runs the fast suite and then the engine tests; together they must fit the budget on
the 2-core development machine. Each run records its wall time in pytest's cache; the e2e run adds
the fast run's, so the second check is the sum. Past the budget the run fails, after the summary
has shown the slowest tests (``--durations``): a slow test is found the day it is added.
"""

from __future__ import annotations

import time

import pytest

_started_key = pytest.StashKey[float]()
_result_key = pytest.StashKey[tuple[float, float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--budget-s`` (seconds; 0: no budget) and ``--budget-share`` (which run of ``make test`` this is)."""
    group = parser.getgroup("budget", "the suite's time budget")
    group.addoption("--budget-s", type=float, default=0.0, help="fail past this many seconds (0: no budget)")
    group.addoption(
        "--budget-share",
        choices=("fast", "e2e"),
        default="fast",
        help="fast: this run alone; e2e: this run plus the last fast run's recorded time",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Start the clock (in the controller only: xdist's workers are not the run)."""
    if not hasattr(config, "workerinput"):
        config.stash[_started_key] = time.monotonic()


def _spent(config: pytest.Config) -> tuple[float, float] | None:
    """(this run's seconds, the seconds that count against the budget), or ``None`` outside a budgeted run."""
    budget = float(config.getoption("budget_s"))
    if budget <= 0 or hasattr(config, "workerinput") or _started_key not in config.stash:
        return None
    own = time.monotonic() - config.stash[_started_key]
    if config.getoption("budget_share") == "fast":
        return own, own
    fast = config.cache.get("budget/fast_s", None) if config.cache is not None else None
    return own, own + (float(fast) if fast is not None else 0.0)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Record this run's time; fail a run that passed but spent more than the budget."""
    spent = _spent(session.config)
    if spent is None:
        return
    own, counted = spent
    if session.config.getoption("budget_share") == "fast" and session.config.cache is not None:
        session.config.cache.set("budget/fast_s", round(own, 1))
    session.config.stash[_result_key] = (own, counted)
    if counted > float(session.config.getoption("budget_s")) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line: this run's time, what counts against the budget, and whether it fits."""
    if _result_key not in config.stash:
        return
    own, counted = config.stash[_result_key]
    budget = float(config.getoption("budget_s"))
    share = config.getoption("budget_share")
    what = "this run" if share == "fast" else "the fast run and this one"
    verdict = "within" if counted <= budget else "OVER"
    terminalreporter.write_line(
        f"time budget: {what} {counted:.0f} s of {budget:.0f} s ({verdict}; this run {own:.0f} s)",
        red=counted > budget,
        green=counted <= budget,
    )
    if counted > budget:
        terminalreporter.write_line(
            "past the budget: the slowest tests are listed above (--durations); make them wait for events, "
            "share their servers, or move them to a cheaper engine"
        )
