"""``dragoman run status`` shows a run's flags, ``dragoman run results --flagged`` writes only flagged lines,
and ``dragoman translate``'s summary names a document's flagged segments."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from cli.bulk import _print_flag_report, document_progress_text, format_flags, format_progress
from cli.main import EXIT_BAD_INPUT, EXIT_OK, main
from contract.progress import RunCounts, progress
from contract.settings import Settings
from tests.flagged_rows import flagged_row, write_rows

FLAGS: list[dict[str, str] | None] = [
    {"numbers": "source number 42 missing"},
    {},
    {"numbers": "source number 7 missing", "repetition": "'la la' repeated 9 times"},
    None,
]


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The commands read the test's servers from the environment."""


def _finished_run(settings: Settings, pg: Any) -> str:
    run_id = str(uuid.uuid4())
    pg.execute(
        "INSERT INTO runs (id, status, source_lang, target_lang, total, name) "
        "VALUES (%s, 'running', 'en', 'fr', %s, 'flags')",
        (run_id, len(FLAGS)),
    )
    records = [
        flagged_row(run_id, n, flags, run_id=run_id, metadata={"custom_id": f"c{n}"}) for n, flags in enumerate(FLAGS)
    ]
    asyncio.run(write_rows(settings.database_url, records))
    return run_id


def test_run_status_and_results_flagged(capsys: pytest.CaptureFixture[str], settings: Settings, pg: Any) -> None:
    run_id = _finished_run(settings, pg)
    assert main(["run", "status", run_id]) == EXIT_OK
    assert "flagged    2 jobs (numbers 2, repetition 1)" in capsys.readouterr().out
    assert main(["run", "status", run_id, "--json"]) == EXIT_OK
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["flagged"] == 2 and counts["flags"] == {"numbers": 2, "repetition": 1}

    assert main(["run", "results", run_id, "--flagged"]) == EXIT_OK
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["custom_id"] for line in lines] == ["c0", "c2"]
    assert lines[1]["quality_flags"]["repetition"] == "'la la' repeated 9 times"
    assert main(["run", "results", run_id, "--flagged", "repetition"]) == EXIT_OK
    assert [json.loads(line)["custom_id"] for line in capsys.readouterr().out.splitlines()] == ["c2"]
    assert main(["run", "results", run_id]) == EXIT_OK
    assert len(capsys.readouterr().out.splitlines()) == 4  # without --flagged: every line


def test_an_unknown_flag_is_bad_input(capsys: pytest.CaptureFixture[str], settings: Settings, pg: Any) -> None:
    run_id = _finished_run(settings, pg)
    assert main(["run", "results", run_id, "--flagged", "bogus"]) == EXIT_BAD_INPUT
    assert "wrong_language" in capsys.readouterr().err  # the message lists the flags that exist


def test_progress_texts_name_the_flags() -> None:
    counts = RunCounts(total=10, succeeded=6, flagged=3, flags={"tags": 1, "numbers": 2})
    document = progress("document", ("d", "running", None, 0.0, None, None), counts, 0.0, 1.0)
    assert format_flags(3, counts.flags) == "3 jobs (numbers 2, tags 1)"
    assert format_flags(0, {}) == "none"
    assert "flagged    3 jobs (numbers 2, tags 1)" in format_progress(document)
    text, _ = document_progress_text(document)
    assert "6/10 segments" in text and "3 flagged" in text


def test_a_documents_flag_report(capsys: pytest.CaptureFixture[str]) -> None:
    report = {
        "flagged": [{"segment": 4, "flags": {"numbers": "source number 3 missing"}, "source": "Take 3 pills."}],
        "flags": {"numbers": 1},
        "segments": 9,
    }
    _print_flag_report(report)
    err = capsys.readouterr().err
    assert "quality: 1 of 9 segments flagged (numbers 1)" in err
    assert "segment 4: numbers: source number 3 missing" in err
    _print_flag_report({"flagged": [], "flags": {}})
    assert capsys.readouterr().err == ""
