"""Queueing orchestration work on RQ: the one function every package uses, with one set of options.

The tasks are named by :mod:`contract.orchestration` (data, so nothing here imports the
orchestrator). RQ is synchronous; an asyncio caller runs :func:`enqueue_orchestration` in a thread.
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
) -> None:
    """Ask the orchestrator (an RQ worker) to run ``task`` with ``args``; idempotent by its job id.

    ``connection`` is a bytes (not decoding) Redis client, as RQ needs. Split and finish are
    retried without a cap (an outage, rows not all written yet), backing off to one try every
    ``RETRY_MAX_SECONDS``; a webhook goes on its own queue, retried after each of
    ``webhook_retry_seconds`` (``DRAGOMAN_WEBHOOK_RETRY_SECONDS``), and its failure callback
    records a delivery given up for good. RQ is imported here, on first use: an application that
    only submits jobs never loads it.
    """
    from rq import Callback, Queue, Retry

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
    )


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
