"""Every Redis key, stream, group and channel name dragoman uses, in one place.

Other languages' producers and dashboards depend on these names; the README's wire-format
section documents the defaults produced here.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.schemas import Priority
from contract.settings import Settings


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """The names derived from one :class:`Settings` (prefix and optional overrides)."""

    prefix: str
    jobs_stream: str  # the interactive lane (the name plain XADD producers have always used)
    bulk_jobs_stream: str
    events_stream: str
    events_channel: str
    consumer_group: str
    dead_letter_stream: str
    control_channel: str
    completions_stream: str
    orchestration_group: str
    orchestration_queue: str
    webhook_queue: str

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisKeys:
        """Resolve the names, defaulting each stream and channel to ``<prefix>:<what>``."""
        prefix = settings.key_prefix
        jobs_stream = settings.jobs_stream or f"{prefix}:jobs"
        return cls(
            prefix=prefix,
            jobs_stream=jobs_stream,
            bulk_jobs_stream=f"{jobs_stream}:bulk",
            events_stream=settings.events_stream or f"{prefix}:events",
            events_channel=settings.events_channel or f"{prefix}:events",
            consumer_group=settings.consumer_group,
            dead_letter_stream=f"{prefix}:dead",
            control_channel=f"{prefix}:control",
            completions_stream=f"{prefix}:completions",
            orchestration_group="dragoman-orchestrator",
            orchestration_queue=f"{prefix}-orchestration",
            webhook_queue=f"{prefix}-webhooks",
        )

    def lane(self, priority: Priority) -> str:
        """The jobs stream of one lane (:class:`~contract.schemas.Priority`)."""
        return self.jobs_stream if priority is Priority.INTERACTIVE else self.bulk_jobs_stream

    @property
    def lanes(self) -> tuple[tuple[Priority, str], ...]:
        """Every lane and its stream, interactive first: what workers read and stats report."""
        return ((Priority.INTERACTIVE, self.jobs_stream), (Priority.BULK, self.bulk_jobs_stream))

    def state(self, job_id: str) -> str:
        """Hash holding a queued or running job's state record."""
        return f"{self.prefix}:job:{job_id}"

    def idempotency(self, key: str, tenant: str | None = None) -> str:
        """String mapping an application's idempotency key to the job id it created.

        A tenant's keys live in a namespace of their own, so two tenants of the HTTP API never
        share a job through the same key (a tenant name has no ``:``, see ``validate_tenant``).
        """
        if tenant is None:
            return f"{self.prefix}:idem:{key}"
        return f"{self.prefix}:tenant:{tenant}:idem:{key}"

    def tenant_queued(self, tenant: str) -> str:
        """Sorted set of a tenant's unfinished jobs (scored by submit time): its queued-job count.

        Written by SUBMIT, emptied by FINISH (which builds the name from :attr:`tenant_queued_parts`).
        """
        head, tail = self.tenant_queued_parts
        return f"{head}{tenant}{tail}"

    @property
    def tenant_queued_parts(self) -> tuple[str, str]:
        """What goes before and after the tenant's name in :meth:`tenant_queued`."""
        return f"{self.prefix}:tenant:", ":queued"

    def revoked_api_key(self, api_key_id: str) -> str:
        """Marker of a just-revoked API key: API servers refuse a key they still hold in their cache."""
        return f"{self.prefix}:revoked-key:{api_key_id}"

    def rate_window(self, api_key_id: str, window: int) -> str:
        """Counter of one API key's requests in one fixed rate-limit window (numbered from the epoch)."""
        return f"{self.prefix}:ratelimit:{api_key_id}:{window}"

    def worker(self, consumer_name: str) -> str:
        """Heartbeat hash of a live worker (expires when the worker stops beating)."""
        return f"{self.prefix}:worker:{consumer_name}"

    def group(self, group_id: str) -> str:
        """Hash of a run or document: its ``kind`` and ``total`` jobs (for the completion count)."""
        return f"{self.prefix}:group:{group_id}"

    def group_done(self, group_id: str) -> str:
        """Set of the run's or document's job ids that reached a final row."""
        return f"{self.prefix}:group:{group_id}:done"

    def finished_in_second(self, unix_second: int) -> str:
        """Counter of jobs finished during one wall-clock second (``dragoman stats`` sums the last minute)."""
        return f"{self.prefix}:finished:{unix_second}"

    @property
    def worker_pattern(self) -> str:
        """Glob matching every live worker's heartbeat."""
        return f"{self.prefix}:worker:*"

    @property
    def state_pattern(self) -> str:
        """Glob matching every state record (for operators and tests, never on the hot path)."""
        return f"{self.prefix}:job:*"
