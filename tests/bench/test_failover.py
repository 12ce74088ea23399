"""bench.failover: a primary of a real Redis Cluster killed during a tiny run; every acknowledged job gets its row."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.failover import Plan, parse_args, run_once
from contract.services import ServiceUrls
from storage.embedded_cluster import EmbeddedCluster
from tests.waiting import FOREVER


def test_the_wait_values_are_read_as_numbers() -> None:
    assert parse_args(["--wait-replicas", "0,1"]).wait_replicas == (0, 1)
    assert parse_args([]).jobs == 10_000


def test_a_tiny_run_kills_shard_0s_primary_and_accounts_for_every_job(
    service_urls: ServiceUrls, tmp_path: Path
) -> None:
    """The replica takes over, the producer's chunks all end acknowledged, and every acknowledged job has a
    row at the end: none lost, none stuck (duplicates are counted, not asserted: a window of their own)."""
    cluster = EmbeddedCluster(tmp_path / "cluster")
    cluster.up()
    try:
        plan = Plan(jobs=600, rate=300, chunk=20, deadline=FOREVER, visibility_s=3, settle_s=2)  # ends when settled
        result = asyncio.run(run_once(cluster, service_urls.database_url, plan, wait_replicas=1))
    finally:
        cluster.down()
    assert result["acknowledged"] == 600 and result["rows"] == 600
    assert result["lost"] == 0 and result["stuck"] == 0
    assert result["rows_at_kill"] >= 300 and result["failover_s"] is not None
    assert result["killed_primary"] in cluster.ports
