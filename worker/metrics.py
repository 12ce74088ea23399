"""The worker's Prometheus metrics: what it finished, how long each stage took, how full the queue is.

Counters and histograms are updated by the writer once per committed batch (not per job on the
hot path); the queue gauges are refreshed from Redis when ``/metrics`` is scraped. vLLM
registers its own engine metrics (``vllm:*``) in the default registry, which the worker serves
alongside these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from producer.queue_stats import QueueStats
from producer.schemas import JobStatus
from producer.wire import JobEvent
from worker.results import JobResult

# Seconds: from a few milliseconds (write, queue wait on an idle worker) to many minutes (backlog).
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
STAGES = ("queue_wait", "engine", "write", "end_to_end")


class WorkerMetrics:
    """Every metric one worker exports, registered in ``registry``.

    Production passes ``prometheus_client.REGISTRY`` (where vLLM's metrics live too); tests and
    benchmarks that run several workers in one process give each a registry of its own.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.jobs = Counter("dragoman_jobs", "Jobs whose final row this worker committed, by final status",
                            ["status"], registry=r)  # fmt: skip
        for status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
            self.jobs.labels(status.value)
        self.in_flight = Gauge("dragoman_jobs_in_flight", "Jobs holding a slot in this worker (in the engine "
                               "or waiting to be written)", registry=r)  # fmt: skip
        self.dead_lettered = Counter("dragoman_dead_lettered", "Entries this worker parked in the dead-letter "
                                     "stream", registry=r)  # fmt: skip
        self.reclaimed = Counter("dragoman_reclaimed", "Stale entries this worker took over from other consumers",
                                 registry=r)  # fmt: skip
        self.stage_seconds = Histogram("dragoman_job_stage_seconds", "Seconds each job spent per stage: "
                                       "queue_wait (submit to start), engine (start to result), write (result "
                                       "to commit and ack), end_to_end (submit to ack)", ["stage"],
                                       buckets=STAGE_BUCKETS, registry=r)  # fmt: skip
        self._stage = {stage: self.stage_seconds.labels(stage) for stage in STAGES}
        self.prompt_tokens = Counter("dragoman_prompt_tokens", "Prompt tokens of finished jobs", registry=r)
        self.output_tokens = Counter("dragoman_output_tokens", "Generated tokens of finished jobs", registry=r)
        self.writer_batch_size = Histogram("dragoman_writer_batch_size", "Results per committed writer batch",
                                           buckets=BATCH_BUCKETS, registry=r)  # fmt: skip
        self.stream_length = Gauge("dragoman_stream_length", "Entries in the jobs stream (acknowledged "
                                   "entries are trimmed periodically)", registry=r)  # fmt: skip
        self.group_lag = Gauge("dragoman_group_lag", "Entries of the jobs stream no consumer has read yet",
                               registry=r)  # fmt: skip
        self.group_pending = Gauge("dragoman_group_pending", "Entries read by a consumer and not acknowledged yet",
                                   registry=r)  # fmt: skip
        self.oldest_pending_age = Gauge("dragoman_oldest_pending_age_seconds", "Age of the oldest pending entry "
                                        "(0 when none)", registry=r)  # fmt: skip
        self.dead_letters = Gauge("dragoman_dead_letters", "Entries in the dead-letter stream", registry=r)
        self.finished_per_second = Gauge("dragoman_queue_jobs_per_second", "Jobs finished per second by all "
                                         "workers over the last minute", registry=r)  # fmt: skip

    def track_in_flight(self, count: Callable[[], int]) -> None:
        """Read the in-flight gauge from ``count`` at scrape time."""
        self.in_flight.set_function(lambda: float(count()))

    def record_batch(
        self,
        results: Sequence[JobResult],
        events: Sequence[JobEvent],
        written: set[str],
        *,
        batch_size: int,
        dead_lettered: int,
        acked_at: float,
    ) -> None:
        """Count one committed and acknowledged batch; only rows this worker wrote count as finished."""
        self.writer_batch_size.observe(batch_size)
        if dead_lettered:
            self.dead_lettered.inc(dead_lettered)
        by_status: dict[str, int] = {}
        for event in events:
            if event.job_id in written:
                by_status[event.status.value] = by_status.get(event.status.value, 0) + 1
        for status, count in by_status.items():
            self.jobs.labels(status).inc(count)
        prompt = output = 0
        queue_wait, engine, write, end_to_end = (self._stage[s] for s in STAGES)
        for result in results:
            if result.spec.job_id not in written:
                continue
            created = result.spec.created_at
            if result.started_at is not None:
                queue_wait.observe(max(0.0, result.started_at - created))
                engine.observe(max(0.0, result.finished_at - result.started_at))
            write.observe(max(0.0, acked_at - result.finished_at))
            end_to_end.observe(max(0.0, acked_at - created))
            prompt += result.prompt_tokens or 0
            output += result.output_tokens or 0
        if prompt:
            self.prompt_tokens.inc(prompt)
        if output:
            self.output_tokens.inc(output)

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
        self.dead_letters.set(stats.dead_letters)
        self.finished_per_second.set(stats.jobs_per_second)
