"""bench.flag_counts on a small run: every query it times agrees on the counts it fills in."""

from __future__ import annotations

from typing import Any

from bench.flag_counts import BEFORE_SQL, _fill, bench


def test_the_benchmark_counts_what_it_filled(pg: Any) -> None:
    run_id = _fill(pg, 200)
    results = bench(pg, run_id, rounds=1)
    assert set(results["median_ms"]) == {
        "before",
        "flagged only",
        "flags",
        "before + keys",
        "results page, every line",
        "results page, flagged=true",
    }
    statuses = {row[0]: int(row[1]) for row in pg.execute(BEFORE_SQL, (run_id,)).fetchall()}
    assert statuses == {"succeeded": 190, "failed": 8, "cancelled": 2}
    # n % 25 == 0: two flags; n % 25 in (1, 2): length_ratio; n % 50 == 3: glossary (succeeded lines only)
    assert results["flags"] == {"numbers": 8, "wrong_language": 8, "length_ratio": 16, "glossary": 4}
    assert results["flagged"] == 28
