"""Progress output: ``\\r`` frames on a terminal, a few plain lines in a log file or CI output."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import bulk
from cli.main import main
from cli.progress import ProgressLine
from contract.progress import GroupProgress, RunCounts
from contract.settings import Settings


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        """Yes."""
        return True


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _document(finished: int, total: int, status: str = "translating") -> GroupProgress:
    return GroupProgress(
        id="doc",
        kind="document",
        status=status,
        counts=RunCounts(total=total, succeeded=finished),
        jobs_per_second=None,
        seconds_left=None,
        created_at=0.0,
        completed_at=None,
        name="a.md",
    )


class FakeClient:
    """Answers ``get_document`` from a list of snapshots, one per poll."""

    def __init__(self, snapshots: list[GroupProgress]) -> None:
        self._snapshots: Iterator[GroupProgress] = iter(snapshots)

    def get_document(self, document_id: str) -> GroupProgress:
        """The next snapshot."""
        return next(self._snapshots)


def _polls(total: int) -> list[GroupProgress]:
    """Waiting to be split for a while, then one more segment done per poll, then completed."""
    splitting = [_document(0, 0, "splitting")] * 5
    return [*splitting, *(_document(done, total) for done in range(total)), _document(total, total, "completed")]


def test_document_progress_off_a_terminal_is_a_few_plain_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bulk.time, "sleep", lambda seconds: None)
    progress = bulk._wait_for_document(FakeClient(_polls(500)), "doc", 60.0, show=True)  # type: ignore[arg-type]

    assert progress.status == "completed"
    err = capsys.readouterr().err  # capsys' stderr is not a terminal, like a log file
    assert "\r" not in err
    lines = err.splitlines()
    # The split wait, then each new 10 % (0 % to 90 % while translating), then the completed state;
    # not one line per poll (506 polls).
    assert 3 <= len(lines) <= 13, lines
    assert lines[0] == "[waiting to be split into segments]"
    assert lines[-1].startswith("[" + "#" * 30 + "] 500/500 segments 100.0%  completed")


def test_document_progress_on_a_terminal_is_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(bulk.sys, "stderr", terminal)
    monkeypatch.setattr(bulk.time, "sleep", lambda seconds: None)
    bulk._wait_for_document(FakeClient(_polls(50)), "doc", 60.0, show=True)  # type: ignore[arg-type]

    out = terminal.getvalue()
    assert out.count("\r") == 56  # one frame per poll
    assert out.count("\n") == 1 and out.endswith("\n")  # the line is ended once, at the end
    assert out.rstrip().endswith("50/50 segments 100.0%  completed")


def test_no_progress_prints_nothing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bulk.time, "sleep", lambda seconds: None)
    bulk._wait_for_document(FakeClient(_polls(20)), "doc", 60.0, show=False)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""


def test_plain_lines_come_every_interval_within_a_decile() -> None:
    out, clock = io.StringIO(), Clock()
    line = ProgressLine(out, interval_s=5.0, clock=clock)
    for second in range(31):  # 30 s spent between 10 % and 20 %
        clock.now = float(second)
        line.update(f"at {second}s", percent=10.0 + second / 10)
    line.finish()
    printed = out.getvalue().splitlines()
    assert printed == ["at 0s", "at 5s", "at 10s", "at 15s", "at 20s", "at 25s", "at 30s"]


def test_a_note_ends_the_terminal_frame_first() -> None:
    terminal = Terminal()
    line = ProgressLine(terminal)
    line.update("[....] 0/4")
    line.note("still waiting to be split: is `dragoman rq-worker` running?")
    line.update("[#...] 1/4")
    line.finish()
    assert terminal.getvalue() == (
        "\r[....] 0/4\nstill waiting to be split: is `dragoman rq-worker` running?\n\r[#...] 1/4\n"
    )


def test_run_submit_progress_off_a_terminal(
    settings_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAGOMAN_SUBMIT_CHUNK_SIZE", "10")
    lines = tmp_path / "lines.jsonl"
    lines.write_text("".join(f'{{"custom_id": "c{i}", "text": "Line {i}."}}\n' for i in range(250)))

    assert main(["run", "submit", str(lines), "--from", "en", "--to", "fr"]) == 0

    captured = capsys.readouterr()
    assert captured.out.strip()  # the run id
    assert "\r" not in captured.err
    reported = captured.err.splitlines()
    assert 2 <= len(reported) <= 12, reported  # 25 chunks: the first, each new 10 %, the last
    assert reported[-1] == "submitted 250/250"
