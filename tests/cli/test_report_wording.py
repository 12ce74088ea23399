"""The document report and the CLI's counts: a cut list says how many more, and one segment is "1 segment"."""

from __future__ import annotations

import pytest

from cli.bulk import _print_flag_report, _print_tag_report, document_progress_text, format_flags
from contract.progress import RunCounts, progress
from contract.wording import counted


def test_counted_takes_the_nouns_number() -> None:
    assert [counted(n, "segment") for n in (0, 1, 2, 1200)] == [
        "0 segments",
        "1 segment",
        "2 segments",
        "1,200 segments",
    ]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"


def test_the_fallback_list_says_how_many_more(capsys: pytest.CaptureFixture[str]) -> None:
    fell_back = [{"segment": i, "source": f"Sentence {i} with <x1>markup</x1>."} for i in range(13)]
    _print_tag_report({"with_tags": 13, "tags_kept": 0, "retried": [], "fell_back": fell_back})
    err = capsys.readouterr().err
    assert err.count("not translated whole") == 10
    assert "… and 3 more (GET /v1/documents/ID lists every one)" in err


def test_a_list_of_ten_has_no_more_line(capsys: pytest.CaptureFixture[str]) -> None:
    fell_back = [{"segment": i, "source": "x"} for i in range(10)]
    _print_tag_report({"with_tags": 10, "tags_kept": 0, "retried": [], "fell_back": fell_back})
    assert "more" not in capsys.readouterr().err


def test_one_segment_is_singular_in_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    _print_tag_report({"with_tags": 1, "tags_kept": 1, "retried": [], "fell_back": []})
    _print_flag_report({"flagged": [{"segment": 0, "flags": {"numbers": "3 missing"}, "source": "3"}], "segments": 1})
    err = capsys.readouterr().err
    assert "inline markup: 1 segment with placeholder tags" in err
    assert "quality: 1 of 1 segment flagged" in err
    assert "1 segments" not in err


def test_one_segment_is_singular_in_progress() -> None:
    counts = RunCounts(total=1, succeeded=0, flagged=1, flags={"tags": 1})
    text, _ = document_progress_text(progress("document", ("d", "running", None, 0.0, None, None), counts, 0.0, 1.0))
    assert "0/1 segment " in text
    assert format_flags(1, {"tags": 1}) == "1 job (tags 1)"
