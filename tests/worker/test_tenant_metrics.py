"""Per-tenant counters on the worker's ``/metrics``: at most ``DRAGOMAN_METRICS_MAX_TENANTS`` tenant labels."""

from __future__ import annotations

import time
import uuid

import redis.asyncio as aioredis
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from contract.schemas import JobSpec, JobStatus
from contract.services import ServiceUrls
from contract.settings import Settings
from worker.metrics import NO_TENANT, OTHER_TENANTS, TenantCounters, WorkerMetrics
from worker.results import JobResult
from worker.writer import ResultWriter


def _samples(metrics: WorkerMetrics) -> dict[str, dict[tuple[str, ...], float]]:
    """The /metrics page as Prometheus reads it: family -> label values -> value (tenant families only)."""
    page = generate_latest(metrics.registry).decode()
    found: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(page):
        if family.name.startswith("dragoman_tenant_"):
            for sample in family.samples:
                key = tuple(sample.labels[k] for k in sorted(sample.labels))
                found.setdefault(family.name, {})[key] = sample.value
    return found


async def test_sixty_tenants_with_a_cap_of_fifty_are_fifty_labels_and_other_with_exact_totals(
    settings: Settings, service_urls: ServiceUrls
) -> None:
    capped = settings.model_copy(update={"metrics_max_tenants": 50})
    metrics = WorkerMetrics()
    connection = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    writer = ResultWriter(capped, connection, service_urls.database_url, metrics)
    now = time.time()
    suffix = uuid.uuid4().hex[:6]
    tenants = [f"t{i:02d}-{suffix}" for i in range(60)]
    results = []
    for i, tenant in enumerate(tenants):  # tenant i sends i + 1 jobs of i + 1 characters
        for j in range(i + 1):
            spec = JobSpec(
                job_id=str(uuid.uuid4()), text="y" * (i + 1), source_lang="en", target_lang="fr", created_at=now,
                tenant=tenant,
            )  # fmt: skip
            status = JobStatus.FAILED if j == 0 else JobStatus.SUCCEEDED
            results.append(
                JobResult(
                    entry_id=f"{i + 1}-{j}", spec=spec, status=status, attempts=1, started_at=now, finished_at=now,
                    prompt_tokens=2, output_tokens=3,
                )
            )  # fmt: skip
    results.append(
        JobResult(
            entry_id="99-0",
            spec=JobSpec(job_id=str(uuid.uuid4()), text="abc", source_lang="en", target_lang="fr", created_at=now),
            status=JobStatus.SUCCEEDED, attempts=1, started_at=now, finished_at=now, prompt_tokens=1, output_tokens=1,
        )
    )  # fmt: skip
    for result in results:
        await writer.put(result)
    await writer.close()
    await writer.run()
    await connection.aclose()

    samples = _samples(metrics)
    characters = samples["dragoman_tenant_characters"]
    labels = {key[0] for key in characters}
    assert len(labels) == 52 and {NO_TENANT, OTHER_TENANTS} <= labels
    assert labels - {NO_TENANT, OTHER_TENANTS} == set(tenants[10:])  # the 50 largest
    # The writer commits in writer batches, smallest tenants first: the first 50 took the labels, and
    # the larger ones that came later took them over; what the smaller ones counted stays in _other.
    assert writer.stats.batches > 1
    assert characters[(OTHER_TENANTS,)] >= sum((i + 1) ** 2 for i in range(10))
    assert characters[(NO_TENANT,)] == 3
    assert sum(characters.values()) == sum((i + 1) ** 2 for i in range(60)) + 3
    jobs = samples["dragoman_tenant_jobs"]
    assert len({status for status, _ in jobs}) == 3 and len(jobs) == 52 * 3  # keys: (status, tenant)
    assert sum(jobs.values()) == len(results)
    # The same totals as the worker's own counters: nothing lost, nothing counted twice.
    finished = sum(metrics.jobs.labels(s.value)._value.get() for s in (JobStatus.SUCCEEDED, JobStatus.FAILED))
    assert sum(jobs.values()) == finished
    assert sum(v for (status, _), v in jobs.items() if status == "failed") == 60
    assert sum(samples["dragoman_tenant_prompt_tokens"].values()) == 2 * (len(results) - 1) + 1
    assert sum(samples["dragoman_tenant_output_tokens"].values()) == 3 * (len(results) - 1) + 1


def test_a_tenant_that_grows_past_twice_the_smallest_takes_its_label_and_every_series_only_grows() -> None:
    counters = TenantCounters(max_tenants=2)
    counted = 0

    def batch(*jobs: tuple[str, int]) -> None:
        nonlocal counted
        counters.record([(tenant, "succeeded", chars, 0, 0) for tenant, chars in jobs])
        counted += sum(chars for _, chars in jobs)

    def series() -> dict[str, float]:
        [_, characters, *_] = counters.collect()
        return {s.labels["tenant"]: s.value for s in characters.samples}

    batch(("a", 10), ("b", 5))
    batch(("c", 7))  # no label free: under _other (7 is not over twice b's 5)
    first = series()
    assert first == {"a": 10, "b": 5, NO_TENANT: 0, OTHER_TENANTS: 7}
    batch(("c", 10))  # c has 17 > 2 * 5: it takes b's label; b's 5 move to _other
    second = series()
    assert second == {"a": 10, "c": 0, NO_TENANT: 0, OTHER_TENANTS: 17 + 5}
    batch(("c", 4), ("b", 1))
    third = series()
    assert third == {"a": 10, "c": 4, NO_TENANT: 0, OTHER_TENANTS: 23}
    for before, after in ((first, second), (second, third)):
        assert all(after[label] >= value for label, value in before.items() if label in after)
    assert sum(third.values()) == counted == counters.totals().characters


def test_no_cap_at_zero_labels_counts_everyone_as_other() -> None:
    counters = TenantCounters(max_tenants=0)
    counters.record([("a", "succeeded", 3, 1, 1), (None, "failed", 2, 0, 0)])
    [jobs, characters, *_] = counters.collect()
    assert {s.labels["tenant"] for s in characters.samples} == {NO_TENANT, OTHER_TENANTS}
    assert {(s.labels["tenant"], s.labels["status"]): s.value for s in jobs.samples if s.value} == {
        (OTHER_TENANTS, "succeeded"): 1,
        (NO_TENANT, "failed"): 1,
    }
