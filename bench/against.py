"""The pipeline benchmark of the working tree and of another commit, alternating in one run: an A/B before landing.

    python -m bench.pipeline --against main --rounds 3 --jobs 20000

``REF`` (a branch, tag or commit) is exported with ``git archive`` into a temporary folder; each round
runs ``python -m bench.pipeline --jobs N --rq-jobs R`` once in the working tree and once in that
folder (which goes first alternates), each child with its own embedded servers and this interpreter,
so both sides run on the same installed packages. The medians of the dragoman pipeline's jobs/s and
of the raw Redis Streams ceiling measured in the same child give the ratio of the two trees and each
tree's share of the ceiling; the machine's noise shows in the spread of the rounds, printed beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class RefNotFoundError(Exception):
    """``--against`` names nothing git knows in this repository."""


def export_ref(ref: str, into: Path) -> str:
    """``ref``'s tree written under ``into`` (no .git); its full commit id."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except subprocess.CalledProcessError:
        raise RefNotFoundError(f"--against {ref!r}: git knows no such branch, tag or commit here") from None
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    with tempfile.TemporaryFile() as tar_file:
        tar_file.write(archive.stdout)
        tar_file.seek(0)
        with tarfile.open(fileobj=tar_file) as tar:
            tar.extractall(into, filter="data")
    return commit


def run_tree(tree: Path, jobs: int, rq_jobs: int, out: Path) -> dict[str, Any]:
    """One ``python -m bench.pipeline`` of ``tree`` (its own modules first on the path); its JSON result."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [
        sys.executable,
        "-m",
        "bench.pipeline",
        "--jobs",
        str(jobs),
        "--rq-jobs",
        str(rq_jobs),
        "--out",
        str(out),
    ]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench.pipeline in {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median and spread of one side's rounds: dragoman jobs/s and its share of the raw streams ceiling."""
    rates = [run["dragoman"]["jobs_per_s"] for run in runs]
    ceilings = [run["raw_streams"]["entries_per_s"] for run in runs]
    shares = [run["dragoman"]["jobs_per_s"] / run["raw_streams"]["entries_per_s"] for run in runs]
    return {
        "jobs_per_s": rates,
        "jobs_per_s_median": statistics.median(rates),
        "raw_streams_median": statistics.median(ceilings),
        "share_of_raw_streams_median": round(statistics.median(shares), 3),
    }


def compare_against(ref: str, rounds: int, jobs: int, rq_jobs: int) -> dict[str, Any]:
    """The working tree and ``ref`` side by side, ``rounds`` times each, alternating which goes first."""
    folder = Path(tempfile.mkdtemp(prefix="dragoman-against-"))
    try:
        reference = folder / "ref"
        commit = export_ref(ref, reference)
        sides: dict[str, list[dict[str, Any]]] = {"tree": [], "ref": []}
        trees = {"tree": ROOT, "ref": reference}
        for round_number in range(rounds):
            order = ("tree", "ref") if round_number % 2 == 0 else ("ref", "tree")
            for side in order:
                result = run_tree(trees[side], jobs, rq_jobs, folder / f"{side}-{round_number}.json")
                sides[side].append(result)
                print(
                    f"round {round_number + 1} {side:<4}: {result['dragoman']['jobs_per_s']:,} jobs/s "
                    f"(raw streams {result['raw_streams']['entries_per_s']:,}/s)",
                    flush=True,
                )
        tree, other = _summary(sides["tree"]), _summary(sides["ref"])
        return {
            "ref": ref,
            "ref_commit": commit,
            "rounds": rounds,
            "jobs": jobs,
            "tree": tree,
            "against": other,
            "tree_vs_ref": round(tree["jobs_per_s_median"] / other["jobs_per_s_median"], 3),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
