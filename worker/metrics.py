"""The worker's Prometheus metrics: what it finished, how long each stage took, how full the queue is.

Counters and histograms are updated by the writer once per committed writer batch (not per job on the
hot path); the queue gauges are refreshed from Redis when ``/metrics`` is scraped. vLLM
registers its own engine metrics (``vllm:*``) in the default registry, which the worker serves
alongside these.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ClassVar, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from broker.queue_stats import QueueStats
from contract.quality import FLAG_NAMES
from contract.schemas import JobStatus, Lane, lane_of
from contract.wire import JobEvent
from worker.results import JobResult

# Seconds: from a few milliseconds (write, queue wait on an idle worker) to many minutes (backlog).
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
WRITER_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
STAGES = ("queue_wait", "engine", "write", "end_to_end")
FINISH_REASONS = (
    "stop",
    "length",
    "repetition",
    "abort",
)  # shown from the start; any other reason the engine gives is added


class MemoryCounts(Protocol):
    """What the translation memory counts (``worker.memory.MemoryCounters``)."""

    lookups: int
    hits: int
    shared: int
    stored: int
    dropped: int
    errors: int


class MemoryCollector(Collector):
    """The translation memory's counters as Prometheus counters, read when ``/metrics`` is scraped."""

    _HELP: ClassVar[dict[str, str]] = {
        "lookups": "Jobs looked up in the translation memory before the engine",
        "hits": "Jobs served from the translation memory without generating",
        "shared": "Jobs that took the translation of an identical job made here moments before or in flight",
        "stored": "Translations stored in the translation memory",
        "dropped": "Translations not stored because PostgreSQL was away too long (the buffer is bounded)",
        "errors": "Translation memory lookups or stores PostgreSQL refused or could not answer",
    }

    def __init__(self, counters: Callable[[], MemoryCounts]) -> None:
        self._counters = counters

    def collect(self) -> Iterator[CounterMetricFamily]:
        """One counter per field of the memory's counts."""
        counts = self._counters()
        for name, help_text in self._HELP.items():
            yield CounterMetricFamily(f"dragoman_memory_{name}", help_text, value=float(getattr(counts, name)))

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The same families, without values (so the registry knows their names)."""
        for name, help_text in self._HELP.items():
            yield CounterMetricFamily(f"dragoman_memory_{name}", help_text)


class StageHistogram(Collector):
    """A labelled histogram that takes a whole batch of observations per call.

    ``prometheus_client``'s ``Histogram.observe`` takes a lock and walks the buckets once per
    value; at thousands of jobs per second and four stages per job that was a measurable share
    of the worker's time. This one sorts a batch into plain lists and is read only at scrape
    time, on the same event loop, so it needs no lock.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        label: str,
        values: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._name, self._documentation, self._label = name, documentation, label
        self._bounds = tuple(float(b) for b in buckets)
        self._counts = {value: [0] * (len(self._bounds) + 1) for value in values}  # the last one is +Inf
        self._sums = dict.fromkeys(values, 0.0)
        registry.register(self)

    def observe_many(self, value: str, observations: Iterable[float]) -> None:
        """Add ``observations`` to the series labelled ``value``."""
        counts, bounds = self._counts[value], self._bounds
        total = 0.0
        for observation in observations:
            counts[bisect_left(bounds, observation)] += 1
            total += observation
        self._sums[value] += total

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """The histogram in Prometheus's cumulative-bucket form."""
        family = HistogramMetricFamily(self._name, self._documentation, labels=[self._label])
        for value, counts in self._counts.items():
            cumulative, running = [], 0
            for bound, count in zip((*self._bounds, float("inf")), counts, strict=True):
                running += count
                cumulative.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
            family.add_metric([value], cumulative, self._sums[value])
        yield family

    def describe(self) -> Iterator[HistogramMetricFamily]:
        """The family without samples, so the registry knows the name before the first scrape."""
        yield HistogramMetricFamily(self._name, self._documentation, labels=[self._label])


NO_TENANT = "_none"
"""The tenant label of jobs not submitted through the HTTP API (a tenant name cannot start with ``_``)."""
OTHER_TENANTS = "_other"
"""The tenant label that sums every tenant past ``DRAGOMAN_METRICS_MAX_TENANTS`` (no tenant name can be it)."""
FINAL_STATUSES = (JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value)


class _Tally:
    """One tenant label's counts: jobs by final status, source characters, tokens."""

    __slots__ = ("characters", "jobs", "output_tokens", "prompt_tokens")

    def __init__(self) -> None:
        self.jobs = dict.fromkeys(FINAL_STATUSES, 0)
        self.characters = 0
        self.prompt_tokens = 0
        self.output_tokens = 0

    def add(self, other: _Tally) -> None:
        for status, count in other.jobs.items():
            self.jobs[status] = self.jobs.get(status, 0) + count
        self.characters += other.characters
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens


class TenantCounters(Collector):
    """Per-tenant counters (jobs by status, characters, tokens) with a bounded number of tenant labels.

    At most ``max_tenants`` tenants have a label of their own; every other tenant's jobs are
    counted under ``tenant="_other"``, and jobs without a tenant under ``tenant="_none"``. A label
    goes to a tenant when one is free, the largest of a writer batch first (by source characters);
    once all are taken, a tenant counted under ``_other`` whose characters so far exceed twice those
    of the smallest labelled tenant takes that tenant's label: the smaller tenant's counts are added
    to ``_other`` and its series ends, the larger one's series starts from zero. So every series
    only grows (a Prometheus counter), and the series of one scrape always add up to everything
    this worker counted. The characters so far of each tenant seen are kept to rank them: memory
    grows with the number of tenants, not with jobs.
    """

    _FAMILIES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("dragoman_tenant_characters", "Source characters of the jobs this worker finished, by tenant"),
        ("dragoman_tenant_prompt_tokens", "Prompt tokens of the jobs this worker finished, by tenant"),
        ("dragoman_tenant_output_tokens", "Generated tokens of the jobs this worker finished, by tenant"),
    )
    _JOBS = ("dragoman_tenant_jobs", "Jobs whose final row this worker committed, by tenant and final status")

    def __init__(self, max_tenants: int = 50) -> None:
        self.max_tenants = max_tenants
        self._labelled: dict[str, _Tally] = {}
        self._none = _Tally()
        self._other = _Tally()
        self._volume: dict[str, int] = {}  # every tenant seen: characters so far, to rank them

    def record(self, jobs: Iterable[tuple[str | None, str, int, int, int]]) -> None:
        """Count finished jobs, each ``(tenant, status, characters, prompt_tokens, output_tokens)``."""
        batch: dict[str | None, _Tally] = {}
        for tenant, status, characters, prompt, output in jobs:
            tally = batch.get(tenant)
            if tally is None:
                tally = batch[tenant] = _Tally()
            tally.jobs[status] = tally.jobs.get(status, 0) + 1
            tally.characters += characters
            tally.prompt_tokens += prompt
            tally.output_tokens += output
        none = batch.pop(None, None)
        if none is not None:
            self._none.add(none)
        volume = self._volume
        for tenant, tally in sorted(batch.items(), key=lambda item: -item[1].characters):
            assert tenant is not None
            volume[tenant] = volume.get(tenant, 0) + tally.characters
            labelled = self._labelled.get(tenant)
            if labelled is None and len(self._labelled) < self.max_tenants:
                labelled = self._labelled[tenant] = _Tally()
            (labelled if labelled is not None else self._other).add(tally)
            if labelled is None:
                self._maybe_promote(tenant)

    def _maybe_promote(self, tenant: str) -> None:
        """Give ``tenant`` (under ``_other``) the smallest labelled tenant's label if it is over twice as large."""
        if not self._labelled:
            return
        smallest = min(self._labelled, key=lambda name: self._volume.get(name, 0))
        if self._volume[tenant] > 2 * self._volume.get(smallest, 0):
            self._other.add(self._labelled.pop(smallest))
            self._labelled[tenant] = _Tally()

    def totals(self) -> _Tally:
        """Everything counted, over every label."""
        total = _Tally()
        for tally in (*self._labelled.values(), self._none, self._other):
            total.add(tally)
        return total

    def _series(self) -> list[tuple[str, _Tally]]:
        return [*sorted(self._labelled.items()), (NO_TENANT, self._none), (OTHER_TENANTS, self._other)]

    def collect(self) -> Iterator[CounterMetricFamily]:
        """The counters of each tenant label, ``_none`` and ``_other`` included (at zero until they count)."""
        series = self._series()
        jobs = CounterMetricFamily(*self._JOBS, labels=["tenant", "status"])
        for label, tally in series:
            for status, count in tally.jobs.items():
                jobs.add_metric([label, status], float(count))
        yield jobs
        for (name, help_text), field in zip(
            self._FAMILIES, ("characters", "prompt_tokens", "output_tokens"), strict=True
        ):
            family = CounterMetricFamily(name, help_text, labels=["tenant"])
            for label, tally in series:
                family.add_metric([label], float(getattr(tally, field)))
            yield family

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The families without samples (so the registry knows their names)."""
        yield CounterMetricFamily(*self._JOBS, labels=["tenant", "status"])
        for name, help_text in self._FAMILIES:
            yield CounterMetricFamily(name, help_text, labels=["tenant"])


class WorkerMetrics:
    """Every metric one worker exports, registered in ``registry``.

    Production passes ``prometheus_client.REGISTRY`` (where vLLM's metrics live too); tests and
    benchmarks that run several workers in one process give each a registry of its own.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.jobs = Counter(
            "dragoman_jobs", "Jobs whose final row this worker committed, by final status", ["status"], registry=r
        )
        for status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
            self.jobs.labels(status.value)
        self.in_flight = Gauge(
            "dragoman_jobs_in_flight",
            "Jobs holding a slot in this worker (in the engine or waiting to be written)",
            registry=r,
        )
        self.dead_lettered = Counter(
            "dragoman_dead_lettered", "Entries this worker appended to the dead-letter stream", registry=r
        )
        self.reclaimed = Counter(
            "dragoman_reclaimed", "Stale entries this worker took over from other consumers", registry=r
        )
        self.stage_seconds = StageHistogram(
            "dragoman_job_stage_seconds",
            "Seconds each job spent per stage: "
            "queue_wait (submit to start), engine (start to result), write "
            "(result to commit and ack), end_to_end (submit to ack)",
            "stage",
            STAGES,
            STAGE_BUCKETS,
            r,
        )
        self.finish_reasons = Counter(
            "dragoman_finish_reasons",
            "Jobs whose final row this worker committed, by how the engine ended them: stop (finished), "
            "length (the output budget ran out twice: the job failed), repetition (the output looped twice: the job "
            "failed), abort (cancelled)",
            ["reason"],
            registry=r,
        )
        for reason in FINISH_REASONS:
            self.finish_reasons.labels(reason)
        self.pieces = Counter(
            "dragoman_job_pieces", "Engine requests of finished jobs (a long text takes several)", registry=r
        )
        self.quality_checked = Counter(
            "dragoman_quality_checked",
            "Translations whose final row this worker committed with the quality checks run (the rate's denominator)",
            registry=r,
        )
        self.quality_flags = Counter(
            "dragoman_quality_flags",
            "Committed translations the quality checks flagged, by flag (one translation may have several flags)",
            ["flag"],
            registry=r,
        )
        for flag in FLAG_NAMES:
            self.quality_flags.labels(flag)
        self.quality_check_errors = Counter(
            "dragoman_quality_check_errors",
            "Translations left unchecked (flags null) because their quality check process died or the check raised",
            registry=r,
        )
        self.quality_retries = Counter(
            "dragoman_quality_retries",
            "Translations retried once because of a DRAGOMAN_RETRY_ON_FLAGS flag, by outcome: better (the retry "
            "was kept) or not_better (the first translation was kept)",
            ["outcome"],
            registry=r,
        )
        for outcome in ("better", "not_better"):
            self.quality_retries.labels(outcome)
        self.prompt_tokens = Counter("dragoman_prompt_tokens", "Prompt tokens of finished jobs", registry=r)
        self.output_tokens = Counter("dragoman_output_tokens", "Generated tokens of finished jobs", registry=r)
        self.writer_batch_size = Histogram(
            "dragoman_writer_batch_size", "Results per committed writer batch", buckets=WRITER_BATCH_BUCKETS, registry=r
        )
        self.stream_length = Gauge(
            "dragoman_stream_length",
            "Entries in the jobs stream (acknowledged entries are trimmed periodically)",
            registry=r,
        )
        self.group_lag = Gauge("dragoman_group_lag", "Entries of the jobs stream no consumer has read yet", registry=r)
        self.group_pending = Gauge(
            "dragoman_group_pending", "Entries read by a consumer and not acknowledged yet", registry=r
        )
        self.oldest_pending_age = Gauge(
            "dragoman_oldest_pending_age_seconds", "Age of the oldest pending entry (0 when none)", registry=r
        )
        lanes = [lane.value for lane in Lane]
        self.lane_queue_wait = StageHistogram(
            "dragoman_lane_queue_wait_seconds",
            "Seconds from submit to start of the jobs this worker finished, by lane (interactive, bulk)",
            "lane",
            lanes,
            STAGE_BUCKETS,
            r,
        )
        self.lane_end_to_end = StageHistogram(
            "dragoman_lane_end_to_end_seconds",
            "Seconds from submit to acknowledged result of the jobs this worker finished, by lane",
            "lane",
            lanes,
            STAGE_BUCKETS,
            r,
        )
        # Every served model's lanes (broker.queue_stats covers them all): a per-model autoscaler reads its own.
        self.lane_length = Gauge(
            "dragoman_lane_stream_length", "Entries in a lane's jobs stream", ["model", "lane"], registry=r
        )
        self.lane_lag = Gauge(
            "dragoman_lane_lag",
            "Entries of a lane's stream no consumer has read yet, and tenants' jobs staged for it",
            ["model", "lane"],
            registry=r,
        )
        self.lane_staged = Gauge(
            "dragoman_lane_staged",
            "Tenants' jobs waiting in a lane's staging streams for their turn (fair share); dragoman_lane_lag "
            "counts them too",
            ["model", "lane"],
            registry=r,
        )
        self.lane_pending = Gauge(
            "dragoman_lane_pending",
            "Entries of a lane read by a consumer and not acknowledged yet",
            ["model", "lane"],
            registry=r,
        )
        self.lane_waiting_age = Gauge(
            "dragoman_lane_oldest_waiting_age_seconds",
            "How long the next unread entry of a lane has waited: its queueing delay now (0 when none waits)",
            ["model", "lane"],
            registry=r,
        )
        self.lane_oldest_pending_age = Gauge(
            "dragoman_lane_oldest_pending_age_seconds",
            "Age of a lane's oldest pending entry (0 when none)",
            ["model", "lane"],
            registry=r,
        )
        self.dead_letters = Gauge("dragoman_dead_letters", "Entries in the dead-letter stream", registry=r)
        self.finished_per_second = Gauge(
            "dragoman_queue_jobs_per_second", "Jobs finished per second by all workers over the last minute", registry=r
        )
        # A sharded deployment's breakdown (DRAGOMAN_REDIS_SHARDS > 1; no series with one shard). The gauges
        # above keep every shard's sum: dashboards and autoscalers aggregate them with max (each worker reports
        # the same queue), which a shard label on them would turn into the largest shard's number.
        shard_lane = ["model", "lane", "shard"]
        self.shard_lane_length = Gauge(
            "dragoman_shard_lane_stream_length", "Entries in one shard's stream of a lane", shard_lane, registry=r
        )
        self.shard_lane_lag = Gauge(
            "dragoman_shard_lane_lag",
            "Entries of one shard's stream of a lane no consumer has read yet, and tenants' jobs staged for it",
            shard_lane,
            registry=r,
        )
        self.shard_lane_pending = Gauge(
            "dragoman_shard_lane_pending",
            "Entries of one shard's stream of a lane read by a consumer and not acknowledged yet",
            shard_lane,
            registry=r,
        )
        self.shard_lane_staged = Gauge(
            "dragoman_shard_lane_staged",
            "Tenants' jobs waiting in one shard's staging streams of a lane (fair share)",
            shard_lane,
            registry=r,
        )
        self.shard_lane_oldest_pending_age = Gauge(
            "dragoman_shard_lane_oldest_pending_age_seconds",
            "Age of the oldest pending entry of one shard's stream of a lane (0 when none)",
            shard_lane,
            registry=r,
        )
        self.shard_dead_letters = Gauge(
            "dragoman_shard_dead_letters", "Entries in one shard's dead-letter stream", ["shard"], registry=r
        )
        self.shard_jobs_per_second = Gauge(
            "dragoman_shard_jobs_per_second",
            "Jobs finished per second on one shard by all workers over the last minute",
            ["shard"],
            registry=r,
        )
        self.tenants = TenantCounters()  # its limit is the writer's DRAGOMAN_METRICS_MAX_TENANTS
        r.register(self.tenants)

    def track_memory(self, counters: Callable[[], MemoryCounts]) -> None:
        """Serve the translation memory's counters (read from ``counters`` at scrape time)."""
        self.registry.register(MemoryCollector(counters))

    def track_in_flight(self, count: Callable[[], int]) -> None:
        """Read the in-flight gauge from ``count`` at scrape time."""
        self.in_flight.set_function(lambda: float(count()))

    def record_writer_batch(
        self,
        results: Sequence[JobResult],
        events: Sequence[JobEvent],
        written: set[str],
        *,
        batch_size: int,
        dead_lettered: int,
        acked_at: float,
    ) -> None:
        """Count one committed and acknowledged writer batch; only rows this worker wrote count as finished."""
        self.writer_batch_size.observe(batch_size)
        if dead_lettered:
            self.dead_lettered.inc(dead_lettered)
        by_status: dict[str, int] = {}
        for event in events:
            if event.job_id in written:
                by_status[event.status.value] = by_status.get(event.status.value, 0) + 1
        for status, count in by_status.items():
            self.jobs.labels(status).inc(count)
        mine = [result for result in results if result.spec.job_id in written]
        started = [(r.started_at, r) for r in mine if r.started_at is not None]
        stages = self.stage_seconds
        stages.observe_many("queue_wait", [max(0.0, at - r.spec.created_at) for at, r in started])
        stages.observe_many("engine", [max(0.0, r.finished_at - at) for at, r in started])
        stages.observe_many("write", [max(0.0, acked_at - r.finished_at) for r in mine])
        stages.observe_many("end_to_end", [max(0.0, acked_at - r.spec.created_at) for r in mine])
        for lane in Lane:
            ours = [r for r in mine if lane_of(r.spec) is lane]
            if ours:
                self.lane_queue_wait.observe_many(
                    lane.value, [max(0.0, r.started_at - r.spec.created_at) for r in ours if r.started_at is not None]
                )
                self.lane_end_to_end.observe_many(lane.value, [max(0.0, acked_at - r.spec.created_at) for r in ours])
        reasons: dict[str, int] = {}
        pieces = 0
        for result in mine:
            if result.finish_reason is not None:
                reasons[result.finish_reason] = reasons.get(result.finish_reason, 0) + 1
            pieces += result.pieces or 0
        for reason, count in reasons.items():
            self.finish_reasons.labels(reason).inc(count)
        self._record_quality(mine)
        if pieces:
            self.pieces.inc(pieces)
        prompt = sum(r.prompt_tokens or 0 for r in mine)
        output = sum(r.output_tokens or 0 for r in mine)
        if prompt:
            self.prompt_tokens.inc(prompt)
        if output:
            self.output_tokens.inc(output)
        status_of = {event.job_id: event.status.value for event in events}
        mine_ids = {r.spec.job_id for r in mine}
        self.tenants.record(
            [
                (
                    r.spec.tenant,
                    status_of.get(r.spec.job_id, r.status.value),
                    len(r.spec.text),
                    r.prompt_tokens or 0,
                    r.output_tokens or 0,
                )
                for r in mine
            ]
            # Rows written for malformed entries (failed by their id): no job to read a tenant from.
            + [(None, JobStatus.FAILED.value, 0, 0, 0) for job_id in written if job_id not in mine_ids]
        )

    def _record_quality(self, results: Sequence[JobResult]) -> None:
        """Count the checked translations of a committed batch and their flags."""
        checked = 0
        flagged: dict[str, int] = {}
        for result in results:
            flags = result.quality_flags
            if flags is None:
                continue
            checked += 1
            for flag in flags:
                flagged[flag] = flagged.get(flag, 0) + 1
        if checked:
            self.quality_checked.inc(checked)
        for flag, count in flagged.items():
            self.quality_flags.labels(flag).inc(count)

    def record_quality_check_errors(self, count: int) -> None:
        """Count translations whose quality check could not run."""
        self.quality_check_errors.inc(count)

    def record_quality_retry(self, *, better: bool) -> None:
        """Count one quality retry and whether its translation was kept."""
        self.quality_retries.labels("better" if better else "not_better").inc()

    def record_reclaimed(self, count: int) -> None:
        """Count entries taken over from other consumers."""
        if count:
            self.reclaimed.inc(count)

    def update_queue(self, stats: QueueStats) -> None:
        """Set the queue gauges from a fresh snapshot."""
        self.stream_length.set(stats.length)
        self.group_lag.set(stats.lag if stats.lag is not None else float("nan"))
        self.group_pending.set(stats.pending)
        self.oldest_pending_age.set(stats.oldest_pending_age_seconds or 0.0)
        for lane in stats.lanes:
            labels = (lane.model, lane.lane)
            self.lane_length.labels(*labels).set(lane.length)
            self.lane_lag.labels(*labels).set(lane.lag if lane.lag is not None else float("nan"))
            self.lane_pending.labels(*labels).set(lane.pending)
            self.lane_staged.labels(*labels).set(lane.staged)
            self.lane_oldest_pending_age.labels(*labels).set(lane.oldest_pending_age_seconds or 0.0)
            self.lane_waiting_age.labels(*labels).set(lane.oldest_waiting_age_seconds or 0.0)
        self.dead_letters.set(stats.dead_letters)
        self.finished_per_second.set(stats.jobs_per_second)
        if stats.shard_count > 1:
            self._update_shards(stats)

    def _update_shards(self, stats: QueueStats) -> None:
        """Set the per-shard gauges (a sharded deployment only)."""
        for shard in stats.shards:
            label = str(shard.shard)
            self.shard_dead_letters.labels(label).set(shard.dead_letters)
            self.shard_jobs_per_second.labels(label).set(shard.jobs_per_second)
            for lane in shard.lanes:
                labels = (lane.model, lane.lane, label)
                self.shard_lane_length.labels(*labels).set(lane.length)
                self.shard_lane_lag.labels(*labels).set(lane.lag if lane.lag is not None else float("nan"))
                self.shard_lane_pending.labels(*labels).set(lane.pending)
                self.shard_lane_staged.labels(*labels).set(lane.staged)
                self.shard_lane_oldest_pending_age.labels(*labels).set(lane.oldest_pending_age_seconds or 0.0)
