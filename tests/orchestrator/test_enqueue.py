"""One way to queue orchestration work: the contract's task names resolve, and every task gets its options."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq.job import Job as RqJob

from broker.keys import RedisKeys
from broker.orchestration import enqueue_orchestration, open_rq_connection
from contract.orchestration import (
    FINISH,
    RESULT_TTL_SECONDS,
    SPLIT,
    SPLIT_TIMEOUT_SECONDS,
    TASKS,
    UNCAPPED_RETRIES,
    WEBHOOK,
    WEBHOOK_GAVE_UP,
)
from contract.services import ServiceUrls
from contract.settings import Settings


@pytest.mark.parametrize("name", [task.function for task in TASKS] + [WEBHOOK_GAVE_UP])
def test_every_task_the_contract_names_is_a_function_of_the_orchestrator(name: str) -> None:
    module, _, attribute = name.rpartition(".")
    assert callable(getattr(importlib.import_module(module), attribute))


@pytest.fixture
def rq_redis(service_urls: ServiceUrls) -> Iterator[redis.Redis]:
    connection = open_rq_connection(service_urls.redis_url)
    yield connection
    connection.close()


def test_split_and_finish_are_retried_without_a_cap_under_ids_of_their_work(
    rq_redis: redis.Redis, settings: Settings
) -> None:
    keys = RedisKeys.from_settings(settings)
    document_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    enqueue_orchestration(rq_redis, keys, SPLIT, document_id)
    enqueue_orchestration(rq_redis, keys, FINISH, "run", run_id)
    for job_id, args in ((f"split-{document_id}", (document_id,)), (f"finish-run-{run_id}", ("run", run_id))):
        job = RqJob.fetch(job_id, connection=rq_redis)
        assert (job.origin, job.args, job.timeout, job.result_ttl) == (
            keys.orchestration_queue,
            args,
            SPLIT_TIMEOUT_SECONDS,
            RESULT_TTL_SECONDS,
        )
        assert job.retries_left == UNCAPPED_RETRIES
    assert rq_redis.llen(f"rq:queue:{keys.orchestration_queue}") == 2


def test_a_webhook_goes_on_its_own_queue_with_bounded_retries_and_a_give_up_callback(
    rq_redis: redis.Redis, settings: Settings
) -> None:
    keys = RedisKeys.from_settings(settings)
    group_id = str(uuid.uuid4())
    enqueue_orchestration(rq_redis, keys, WEBHOOK, "document", group_id, webhook_retry_seconds=[1, 5])
    job = RqJob.fetch(f"webhook-document-{group_id}", connection=rq_redis)
    assert (job.origin, job.args, job.retries_left, job.retry_intervals) == (
        keys.webhook_queue,
        ("document", group_id),
        2,
        [1, 5],
    )
    callback = job.failure_callback  # RQ resolves the name the contract gave
    assert callback is not None and f"{callback.__module__}.{callback.__name__}" == WEBHOOK_GAVE_UP
