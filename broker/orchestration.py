"""Queueing orchestration work on RQ: the one function every package uses, with one set of options.

The tasks are named by :mod:`contract.orchestration` (data, so nothing here imports the
orchestrator). RQ is synchronous; an asyncio caller runs :func:`enqueue_orchestration` in a thread.

**Turns by tenant.** A tenant's tasks take turns with every other tenant's: each is queued with RQ's
concurrency limit (``rq.RateLimit``) under a key of the tenant's own (:meth:`RedisKeys.tenant_turns`),
so at most ``DRAGOMAN_ORCHESTRATION_TENANT_CONCURRENCY`` (splits, finishes) or
``DRAGOMAN_WEBHOOK_TENANT_CONCURRENCY`` (deliveries) of one tenant's tasks are on the queue or running
at once; RQ holds the rest aside and queues the oldest as soon as one of the tenant's ends (done,
failed or waiting for a retry). The queue itself stays first-in first-out, but with one task of each
tenant on it that order is a round robin: another tenant's document waits behind at most one of each
tenant's tasks, never behind a tenant's hundred, and a receiver that never answers holds only its own
tenant's deliveries. Work without a tenant (the CLI, the Python client) is queued as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from broker.keys import RedisKeys
from broker.redis_client import is_cluster_url
from contract.backoff import retry_intervals
from contract.errors import ConfigurationError
from contract.orchestration import (
    RESULT_TTL_SECONDS,
    RETRY_MAX_SECONDS,
    SPLIT_TIMEOUT_SECONDS,
    UNCAPPED_RETRIES,
    WEBHOOK_GAVE_UP,
    OrchestratorTask,
)
from contract.services import redact_url
from contract.settings import Settings


def enqueue_orchestration(
    connection: redis.Redis,
    keys: RedisKeys,
    task: OrchestratorTask,
    *args: str,
    webhook_retry_seconds: Sequence[float] = (),
    tenant: str | None = None,
    tenant_concurrency: int = 1,
) -> None:
    """Ask the orchestrator (an RQ worker) to run ``task`` with ``args``; idempotent by its job id.

    ``connection`` is a bytes (not decoding) Redis client, as RQ needs. Split and finish are
    retried without a cap (an outage, rows not all written yet), backing off to one try every
    ``RETRY_MAX_SECONDS``; a webhook goes on its own queue, retried after each of
    ``webhook_retry_seconds`` (``DRAGOMAN_WEBHOOK_RETRY_SECONDS``), and its failure callback
    records a delivery given up for good. ``tenant``: whose work it is (None: nobody's, the CLI's
    or the Python client's); at most ``tenant_concurrency`` of a tenant's tasks are on the queue or
    running at once (:func:`tenant_concurrency` gives the setting for a task), the others wait their
    turn. RQ is imported here, on first use: an application that only submits jobs never loads it.
    """
    from rq import Callback, Queue, RateLimit, Retry

    if task.webhook:
        intervals = [int(s) for s in webhook_retry_seconds]
        queue = keys.webhook_queue
        retry = Retry(max=len(intervals), interval=intervals) if intervals else None
        on_failure = Callback(WEBHOOK_GAVE_UP)
    else:
        queue = keys.orchestration_queue
        retry = Retry(max=UNCAPPED_RETRIES, interval=retry_intervals(1, RETRY_MAX_SECONDS))
        on_failure = None
    Queue(queue, connection=connection).enqueue(
        task.function,
        *args,
        job_id=task.job_id(*args),
        job_timeout=SPLIT_TIMEOUT_SECONDS,
        result_ttl=RESULT_TTL_SECONDS,
        retry=retry,
        on_failure=on_failure,
        rate_limit=None if tenant is None else RateLimit(keys.tenant_turns(queue, tenant), tenant_concurrency),
    )


def tenant_concurrency(settings: Settings, task: OrchestratorTask) -> int:
    """How many of one tenant's ``task``-kind tasks may be queued or running at once (a webhook's setting, or
    the other tasks')."""
    return settings.webhook_tenant_concurrency if task.webhook else settings.orchestration_tenant_concurrency


def orchestration_redis_url(settings: Settings, redis_url: str | None = None) -> str:
    """The single Redis server RQ's queues live on: ``DRAGOMAN_ORCHESTRATION_REDIS_URL``, else the queue's
    Redis (``redis_url``: the resolved one, default ``settings.redis_url``) when that is a single server.

    RQ does not support Redis Cluster (its keys span slots), so a cluster ``redis_url`` with no
    orchestration URL raises :class:`~contract.errors.ConfigurationError` saying what to set: every
    process that queues or runs orchestration work calls this at start.
    """
    configured = settings.orchestration_redis_url
    if configured:
        if is_cluster_url(configured):
            raise ConfigurationError(
                f"DRAGOMAN_ORCHESTRATION_REDIS_URL={redact_url(configured)} names a Redis Cluster, but RQ (the "
                "orchestration and webhook queues) needs a single Redis server: set it to redis://host:port"
            )
        return configured
    queue_url = redis_url or settings.redis_url
    if not queue_url:
        raise ConfigurationError(
            "no Redis for the orchestration queue: set DRAGOMAN_ORCHESTRATION_REDIS_URL (or DRAGOMAN_REDIS_URL)"
        )
    if is_cluster_url(queue_url):
        raise ConfigurationError(
            f"DRAGOMAN_REDIS_URL={redact_url(queue_url)} is a Redis Cluster, and the orchestration and webhook "
            "queues (RQ) cannot live on one: set DRAGOMAN_ORCHESTRATION_REDIS_URL to a single Redis server "
            "(redis://host:port; `dragoman services up --cluster` prints the embedded one)"
        )
    return queue_url


def open_rq_connection(redis_url: str) -> redis.Redis:
    """A Redis connection as RQ needs it (replies as bytes, not decoded), to :func:`orchestration_redis_url`'s
    server (a cluster URL here is a :class:`~contract.errors.ConfigurationError`, not RQ's CROSSSLOT later)."""
    if is_cluster_url(redis_url):
        raise ConfigurationError(
            f"{redact_url(redis_url)} is a Redis Cluster; RQ needs a single server: "
            "set DRAGOMAN_ORCHESTRATION_REDIS_URL"
        )
    return redis.Redis.from_url(redis_url)
