"""``bench.pipeline --against REF``: REF's tree exported beside this one, both run alternately, the ratio."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import against
from bench.against import ROOT, RefNotFoundError, compare_against, export_ref


def test_a_ref_is_exported_as_its_own_tree(tmp_path: Path) -> None:
    commit = export_ref("HEAD", tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert commit == head.stdout.strip()
    assert (tmp_path / "bench" / "pipeline.py").read_bytes() == subprocess.run(
        ["git", "show", "HEAD:bench/pipeline.py"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    assert not (tmp_path / ".git").exists()


def test_an_unknown_ref_is_named(tmp_path: Path) -> None:
    with pytest.raises(RefNotFoundError, match="no-such-branch"):
        export_ref("no-such-branch", tmp_path)


def test_the_sides_alternate_and_the_ratio_is_of_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    rates = {ROOT: iter([900, 1100, 1000]), None: iter([500, 450, 550])}

    def fake_run(tree: Path, jobs: int, rq_jobs: int, out: Path) -> dict[str, Any]:
        calls.append(tree)
        rate = next(rates[ROOT if tree == ROOT else None])
        return {"dragoman": {"jobs_per_s": rate}, "raw_streams": {"entries_per_s": 10_000}}

    monkeypatch.setattr(against, "run_tree", fake_run)
    compared = compare_against("HEAD", 3, 100, 10)
    firsts = [calls[0] == ROOT, calls[2] == ROOT, calls[4] == ROOT]
    assert firsts == [True, False, True]  # which side goes first alternates
    assert compared["tree"]["jobs_per_s_median"] == 1000 and compared["against"]["jobs_per_s_median"] == 500
    assert compared["tree_vs_ref"] == 2.0 and compared["tree"]["share_of_raw_streams_median"] == 0.1
