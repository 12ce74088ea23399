"""PNG plots of the committed GPU results: jobs/s against max_num_seqs, and latency percentiles per mode.

pip install matplotlib   # not part of the install: only this script needs it
python -m bench.plot [--results bench/results] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# bench/gpu.py measures latency from the moment a job is handed to the engine: the continuous feeds
# hand over up to 512 jobs for 256 slots (half wait inside vLLM), a static batch only its 16;
# the wait before the hand-over (for a batch, or for an in-flight slot) is in neither.
MODES = (
    ("bare", "bare engine (ceiling)"),
    ("dragoman", "dragoman end to end"),
    ("static16", "static batches of 16\n(only 16 handed over at a time)"),
)


def plot_sweep(result: dict[str, Any], out: Path, name: str) -> Path:
    """jobs/s and output tokens/s of dragoman end to end for each max_num_seqs."""
    import matplotlib.pyplot as plt

    points = sorted(result["sweep"], key=lambda p: p["max_num_seqs"])
    seqs = [p["max_num_seqs"] for p in points]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    ax.plot(seqs, [p["jobs_per_s"] for p in points], marker="o", label="dragoman end to end")
    ax.axhline(result["static16"]["jobs_per_s"], color="grey", linestyle="--", label="static batches of 16")
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqs, [str(s) for s in seqs])
    ax.set_xlabel("max_num_seqs")
    ax.set_ylabel("jobs/s")
    ax.set_title(f"{result['model']}: throughput vs max_num_seqs (H100)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out / f"{name}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_latency(result: dict[str, Any], out: Path, name: str) -> Path:
    """p50/p95/p99 latency of every mode, for all jobs and for the shortest quarter."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), dpi=110, sharey=True)
    panels = (
        (axes[0], "latency_s", "all jobs"),
        (axes[1], "shortest_quarter_latency_s", "shortest quarter (head-of-line blocking)"),
    )
    for ax, key, title in panels:
        width = 0.25
        for i, (mode, label) in enumerate(MODES):
            values = [result[mode][key][q] for q in ("p50", "p95", "p99")]
            ax.bar([x + (i - 1) * width for x in range(3)], values, width, label=label)
        ax.set_xticks(range(3), ["p50", "p95", "p99"])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("seconds, handed to engine -> result")
    axes[1].legend(fontsize=8)
    fig.suptitle(
        f"{result['model']}, {result.get('workload', 'realistic')} workload: latency, "
        f"{result['dragoman']['jobs']} jobs (H100)"
    )
    fig.tight_layout()
    path = out / f"{name}-latency.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> None:
    """Plot every GPU result file that has the data for it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=Path("bench/results"))
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no screen
    except ImportError:
        raise SystemExit("bench.plot needs matplotlib (not installed with dragoman): pip install matplotlib") from None
    for path in sorted(args.results.glob("gpu-*.json")):
        result = json.loads(path.read_text())
        if result.get("sweep"):
            print(plot_sweep(result, args.out, path.stem))
        else:
            print(plot_latency(result, args.out, path.stem))


if __name__ == "__main__":
    main()
