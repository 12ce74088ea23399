"""Duplicate custom ids are found in bounded memory (the old check held a digest per line: ~130 MB a million)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import producer.duplicates
from producer.duplicates import DuplicateFinder, WantedCustomIds, custom_ids_at
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
        assert validate_run_file(path, "en", "fr", 1_000) == (lines, set())
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


async def test_wanted_custom_ids_stop_after_the_last_wanted_line_from_either_kind_of_loop() -> None:
    lines = [(n, json.dumps({"custom_id": f"id-{n}"}).encode()) for n in range(1, 11)]
    read: list[int] = []

    async def stream() -> AsyncIterator[tuple[int, bytes]]:
        for number, line in lines:
            read.append(number)
            yield number, line

    assert await custom_ids_at(stream(), {2, 5}) == {2: "id-2", 5: "id-5"}
    assert read == [1, 2, 3, 4, 5]  # nothing past the last wanted line is read
    read.clear()
    assert await custom_ids_at(stream(), set()) == {} and read == []  # nothing wanted: nothing read

    picker = WantedCustomIds({3})
    assert [picker.offer(n, line.decode()) for n, line in lines[:3]] == [False, False, True]
    assert picker.found == {3: "id-3"}
