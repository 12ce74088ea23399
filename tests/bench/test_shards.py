"""bench.shards: the job path's scripts on one server and on a Redis Cluster with one, two and three shards, tiny."""

from __future__ import annotations

import pytest

from bench.shards import parse_args, run


def test_an_unknown_target_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--targets", "cluster-3,single"]).targets == ("cluster-3", "single")
    with pytest.raises(SystemExit):
        parse_args(["--targets", "cluster-5"])
    assert "unknown target(s) ['cluster-5']" in capsys.readouterr().err


def test_a_tiny_run_queues_and_finishes_every_job_on_its_shard_and_counts_redis_cpu() -> None:
    """Every job queued once and acknowledged (the bench checks each shard's lane and pending list);
    three shards on three different primaries, two on two, one shard on one."""
    targets = ("single", "cluster-1", "cluster-2", "cluster-3")
    result = run(targets, jobs=600, clients=2, rounds=1, chunk=100, batch=64, block_ms=5, replicas=0)
    by_target = {r["target"]: r for r in result["runs"]}
    assert set(by_target) == set(targets)
    for figures in by_target.values():
        assert sum(shard["queued"] for shard in figures["per_shard"]) == 600
        assert all(shard["pending"] == 0 for shard in figures["per_shard"])
        assert figures["jobs_per_s"] > 0 and figures["redis_cpu_us_per_job"] > 0
    three = by_target["cluster-3"]
    assert len(three["per_shard"]) == 3 and all(shard["queued"] > 100 for shard in three["per_shard"])
    assert len(set(three["shard_primaries"])) == 3
    two = by_target["cluster-2"]
    assert len(two["per_shard"]) == 2 and all(shard["queued"] > 150 for shard in two["per_shard"])
    assert len(set(two["shard_primaries"])) == 2
    assert len(by_target["cluster-1"]["per_shard"]) == 1 and len(by_target["single"]["per_shard"]) == 1
    assert result["two_vs_one_shard"] > 0 and result["three_vs_one_shard"] > 0
