"""Duplicate custom ids are found in bounded memory (the old check held a digest per line: ~130 MB a million)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

import producer.duplicates
from producer.duplicates import DuplicateFinder
from producer.run_files import InvalidRunFileError, validate_run_file


def test_duplicates_are_found_across_spilled_chunks() -> None:
    with DuplicateFinder(run_size=3) as finder:
        for line, key in enumerate(["a", "b", "c", "d", "a", "e", "f", "b", "a", "g"], start=1):
            finder.add(key, line)
        assert finder.duplicates(limit=10) == [(5, 1), (8, 2), (9, 1)]
        assert finder.duplicates(limit=2) == [(5, 1), (8, 2)]


def test_validating_a_large_run_file_holds_a_bounded_number_of_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = 40_000
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps({"custom_id": f"row-{i}", "text": "x"}) + "\n" for i in range(lines)))
    monkeypatch.setattr(producer.duplicates, "DEFAULT_RUN_SIZE", 1_000)
    tracemalloc.start()
    try:
        assert validate_run_file(path, "en", "fr", 1_000) == lines
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3_000_000, f"{peak:,} bytes at peak"  # a set of every id's digest took about 6 MB here

    with path.open("a") as handle:
        handle.write(json.dumps({"custom_id": "row-7", "text": "again"}) + "\n")
    with pytest.raises(InvalidRunFileError, match=f"line {lines + 1}: custom_id 'row-7' already used on line 8"):
        validate_run_file(path, "en", "fr", 1_000)


def test_counted_duplicates_keep_the_lowest_lines_and_count_them_all() -> None:
    with DuplicateFinder(run_size=3) as finder:  # several spilled runs
        for line in range(1, 21):
            finder.add("same" if line % 2 else f"k{line}", line)
        pairs, total = finder.duplicates_counted(3)
        assert pairs == [(3, 1), (5, 1), (7, 1)] and total == 9
        assert finder.duplicates_counted(0) == ([], 9)
