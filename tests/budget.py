"""The suite's time budget, visible in every run: ``--budget-s=900 --budget-share=fast|e2e``.

``make test`` runs the fast suite and then the engine tests; together they must fit the budget on
the 2-core development machine. Each run records its time in pytest's cache; the e2e run adds the
fast run's, so its check is the sum. Past the budget the run fails, after the summary has shown the
slowest tests (``--durations``): a slow test is found the day it is added.

The budget is for this suite on its machine, not for whatever else the machine runs: while the run
lasts, the CPU time other processes take (the machine's busy time in ``/proc/stat`` less this run's
own process tree's) is sampled, and the time that counts is the run's wall time times the share of
the machine left to it. On an idle machine that is the wall time; with two CPU-bound processes
beside it on two cores, about half of it. Both figures are printed.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_SAMPLE_S = 1.0


def _machine_busy_s() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (``None`` where there is no ``/proc/stat``)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


def _tree_cpu_s(root: int, marker: bytes) -> float:
    """CPU seconds of ``root`` and every live process below it (their reaped children's included), and of the
    servers this run started that left its tree (PostgreSQL daemonizes under ``pg_ctl``): those whose command line
    names ``marker``, the run's temporary folder."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    marked: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue
        pid = int(entry.name)
        after_name = stat[stat.rindex(")") + 2 :].split()
        parents[pid] = int(after_name[1])
        utime, stime, cutime, cstime = (int(value) for value in after_name[11:15])
        spent[pid] = (utime + stime + cutime + cstime) / _CLOCK_TICKS
        if marker and marker in cmdline:
            marked.add(pid)
    total = 0.0
    for pid, seconds in spent.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents and ancestor not in marked:
            ancestor = parents[ancestor]
        if ancestor == root or ancestor in marked:
            total += seconds
    return total


@dataclass
class _LoadSampler:
    """Samples, while the run lasts, how much CPU this run's processes and the whole machine spend."""

    marker: bytes = b""
    root: int = field(default_factory=os.getpid)
    started: float = field(default_factory=time.monotonic)
    ours_s: float = 0.0
    busy_s: float = 0.0
    _last_ours: float = 0.0
    _last_busy: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Take the first sample and keep sampling on a daemon thread."""
        self._last_busy = _machine_busy_s()
        self._last_ours = _tree_cpu_s(self.root, self.marker) if self._last_busy is not None else 0.0
        if self._last_busy is not None:
            self._thread = threading.Thread(target=self._run, name="budget-sampler", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(_SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        """Add what was spent since the last sample (a process that left the tree unreaped loses only its last
        second: the increase is counted, never a decrease)."""
        busy, ours = _machine_busy_s(), _tree_cpu_s(self.root, self.marker)
        if busy is None or self._last_busy is None:
            return
        self.busy_s += max(0.0, busy - self._last_busy)
        self.ours_s += max(0.0, ours - self._last_ours)
        self._last_busy, self._last_ours = busy, ours

    def stop(self) -> tuple[float, float]:
        """(wall seconds, the share of the machine other processes took meanwhile, 0 to 1)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        wall = time.monotonic() - self.started
        capacity = (os.cpu_count() or 1) * wall
        foreign = max(0.0, self.busy_s - self.ours_s)
        return wall, min(0.9, foreign / capacity) if capacity > 0 else 0.0


_sampler_key = pytest.StashKey[_LoadSampler]()
_result_key = pytest.StashKey[tuple[float, float, float]]()


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


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin's, whose base folder names this run's servers
def pytest_configure(config: pytest.Config) -> None:
    """Start the clock and the load sampler (in the controller only: xdist's workers are not the run)."""
    if hasattr(config, "workerinput") or float(config.getoption("budget_s")) <= 0:
        return
    factory = getattr(config, "_tmp_path_factory", None)
    marker = str(factory.getbasetemp()).encode() if factory is not None else b""
    sampler = _LoadSampler(marker=marker)
    sampler.start()
    config.stash[_sampler_key] = sampler


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Record this run's time; fail a run that passed but spent more than the budget."""
    config = session.config
    if _sampler_key not in config.stash:
        return
    wall, foreign = config.stash[_sampler_key].stop()
    own = wall * (1.0 - foreign)  # the run's time with the machine to itself
    counted = own
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: each run counts alone
    if config.getoption("budget_share") == "fast":
        if cache is not None:
            cache.set("budget/fast_s", round(own, 1))
    elif cache is not None:
        counted += float(cache.get("budget/fast_s", 0.0))
    config.stash[_result_key] = (wall, foreign, counted)
    if counted > float(config.getoption("budget_s")) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line: what counts against the budget, whether it fits, and how busy the machine was otherwise."""
    if _result_key not in config.stash:
        return
    wall, foreign, counted = config.stash[_result_key]
    budget = float(config.getoption("budget_s"))
    what = "this run" if config.getoption("budget_share") == "fast" else "the fast run and this one"
    verdict = "within" if counted <= budget else "OVER"
    terminalreporter.write_line(
        f"time budget: {what} {counted:.0f} s of {budget:.0f} s ({verdict}); this run {wall:.0f} s of wall time, "
        f"the machine {foreign:.0%} busy with other work meanwhile",
        red=counted > budget,
        green=counted <= budget,
    )
    if counted > budget:
        terminalreporter.write_line(
            "past the budget: the slowest tests are listed above (--durations); make them wait for events, "
            "share their servers, or move them to a cheaper engine"
        )
