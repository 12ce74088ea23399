"""bench.pipeline --redis cluster --shards 3: the real worker on a local Redis Cluster, tiny."""

from __future__ import annotations

from bench.pipeline import bench_targets
from contract.services import ServiceUrls


def test_the_pipeline_runs_on_three_shards_of_a_cluster_and_counts_the_primaries_cpu(
    service_urls: ServiceUrls,
) -> None:
    result = bench_targets(service_urls, ("single", "cluster"), (1, 3), jobs=300, max_in_flight=64, rounds=1)
    assert set(result["median"]) == {"single-1", "single-3", "cluster-1", "cluster-3"}
    for figures in result["median"].values():
        assert figures["jobs_per_s"] > 0
        assert figures["redis_cpu_us_per_job_worker"] > 0 and figures["redis_cpu_us_per_job_submit"] > 0
