"""The producer API against real Redis and PostgreSQL: submit, submit_many, get, cancel, bad input."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime
from typing import Any

import pytest
import redis

from broker.keys import RedisKeys
from contract.settings import Settings
from contract.wire import decode_job_entry
from producer import (
    Client,
    EmptyTextError,
    InvalidJobError,
    InvalidJobIdError,
    InvalidMetadataError,
    JobNotCancellableError,
    JobNotFoundError,
    JobStatus,
    JobTimeoutError,
    TextTooLongError,
    TranslationRequest,
    UnsupportedLanguageError,
)


def _nothing_written(client: Client, raw: redis.Redis) -> None:
    keys = client.keys
    assert raw.xlen(keys.jobs_stream) == 0
    assert list(raw.scan_iter(match=keys.state_pattern)) == []
    assert list(raw.scan_iter(match=keys.idempotency_pattern)) == []


def test_submit_writes_state_record_and_stream_entry(client: Client, raw_redis: redis.Redis) -> None:
    job_id = client.submit("Hello, world", "EN", "fr_fr", metadata={"doc": "a.txt", "n": 1})

    state = raw_redis.hgetall(client.keys.state(job_id))
    assert state["status"] == "queued"
    assert (state["source_lang"], state["target_lang"]) == ("en", "fr-FR")
    assert 0 < raw_redis.ttl(client.keys.state(job_id)) <= client.settings.state_ttl_seconds

    [(_, fields)] = raw_redis.xrange(client.keys.jobs_stream)
    assert fields["v"] == "1" and fields["id"] == job_id
    spec = decode_job_entry(fields, max_chars=100)
    assert (spec.text, spec.source_lang, spec.target_lang) == ("Hello, world", "en", "fr-FR")
    assert spec.metadata == {"doc": "a.txt", "n": 1}


def test_submit_takes_a_request_object_or_its_fields_and_not_both(client: Client, raw_redis: redis.Redis) -> None:
    request = TranslationRequest("Hello", "en", "de", metadata={"n": 1}, lane="bulk", idempotency_key="k-1")
    job_id = client.submit(request)
    assert client.submit("Hello", "en", "de", idempotency_key="k-1") == job_id  # the keyword form, the same request
    [(_, fields)] = raw_redis.xrange(client.keys.bulk_jobs_stream)
    assert decode_job_entry(fields, max_chars=100).metadata == {"n": 1}

    with pytest.raises(InvalidJobError, match="alone"):
        client.submit(request, "en", "de")
    with pytest.raises(InvalidJobError, match="source_lang and target_lang"):
        client.submit("Hello")
    with pytest.raises(InvalidJobError, match="alone"):
        client.submit(request, lane="bulk")


def test_a_closed_client_refuses_calls_and_closing_twice_is_harmless(settings: Settings) -> None:
    client = Client(settings)
    client.close()
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.submit("Hello", "en", "de")


def test_submit_is_all_or_nothing_when_redis_rejects_it(client: Client, raw_redis: redis.Redis) -> None:
    raw_redis.set(client.keys.jobs_stream, "not a stream")  # XADD will fail with WRONGTYPE
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        client.submit("Hello", "en", "fr")
    assert list(raw_redis.scan_iter(match=client.keys.state_pattern)) == []


def test_get_answers_queued_jobs_from_the_state_record(client: Client) -> None:
    job_id = client.submit("Hello", "en", "de")
    job = client.get(job_id)
    assert job.id == job_id
    assert job.status is JobStatus.QUEUED
    assert (job.source_lang, job.target_lang, job.attempts) == ("en", "de", 0)
    assert isinstance(job.created_at, datetime)
    assert job.translation is None and job.finished_at is None


def test_get_unknown_and_malformed_ids(client: Client) -> None:
    with pytest.raises(JobNotFoundError, match="no job with id"):
        client.get(str(uuid.uuid4()))
    with pytest.raises(InvalidJobIdError, match="not a job id"):
        client.get("definitely-not-a-uuid")


def test_submit_many_ten_thousand(client: Client, raw_redis: redis.Redis) -> None:
    items = [TranslationRequest(f"sentence number {i}", "en", "fr", metadata={"i": i}) for i in range(10_000)]
    ids = client.submit_many(items)

    assert len(ids) == len(set(ids)) == 10_000
    assert raw_redis.xlen(client.keys.jobs_stream) == 10_000
    entries = raw_redis.xrange(client.keys.jobs_stream, count=10_000)
    assert [fields["id"] for _, fields in entries] == ids  # stream order is input order
    assert json.loads(entries[1234][1]["payload"])["metadata"] == {"i": 1234}
    with raw_redis.pipeline() as pipe:
        for job_id in ids:
            pipe.hget(client.keys.state(job_id), "status")
        assert set(pipe.execute()) == {"queued"}


def test_submit_many_accepts_dicts(client: Client) -> None:
    ids = client.submit_many(
        [
            {"text": "one", "source_lang": "en", "target_lang": "fr"},
            {"text": "two", "source_lang": "en", "target_lang": "ja"},
        ]
    )
    assert [client.get(i).target_lang for i in ids] == ["fr", "ja"]


def test_submit_many_rejects_everything_if_one_item_is_bad(client: Client, raw_redis: redis.Redis) -> None:
    items: list[Any] = [{"text": f"ok {i}", "source_lang": "en", "target_lang": "fr"} for i in range(100)]
    items[57] = {"text": "   ", "source_lang": "en", "target_lang": "fr"}
    with pytest.raises(EmptyTextError, match="item 57"):
        client.submit_many(items)
    _nothing_written(client, raw_redis)
    with pytest.raises(InvalidJobError, match="item 0: missing field 'target_lang'"):
        client.submit_many([{"text": "x", "source_lang": "en"}])
    with pytest.raises(InvalidJobError, match="unknown field"):
        client.submit_many([{"text": "x", "source_lang": "en", "target_lang": "fr", "colour": 1}])
    _nothing_written(client, raw_redis)


def test_idempotency_key_returns_the_first_job(client: Client, raw_redis: redis.Redis) -> None:
    first = client.submit("Hello", "en", "fr", idempotency_key="order-42")
    again = client.submit("Hello again", "en", "de", idempotency_key="order-42")
    other = client.submit("Hello", "en", "fr", idempotency_key="order-43")
    assert again == first != other
    assert raw_redis.xlen(client.keys.jobs_stream) == 2
    many = client.submit_many(
        [
            TranslationRequest("x", "en", "fr", idempotency_key="order-42"),
            TranslationRequest("y", "en", "fr", idempotency_key="order-44"),
        ]
    )
    assert many[0] == first
    assert raw_redis.xlen(client.keys.jobs_stream) == 3


class _NotJson:
    pass


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"text": ""}, EmptyTextError, "empty"),
        ({"text": " \n\t "}, EmptyTextError, "whitespace"),
        ({"text": "x" * 101}, TextTooLongError, "101 characters, over the limit of 100"),
        ({"text": "nul\x00byte"}, InvalidJobError, "NUL"),
        ({"source_lang": "xx"}, UnsupportedLanguageError, "unknown language code 'xx'"),
        ({"source_lang": ""}, UnsupportedLanguageError, "empty"),
        ({"target_lang": "klingon"}, UnsupportedLanguageError, "klingon"),
        ({"target_lang": "und"}, UnsupportedLanguageError, "und"),
        ({"target_lang": "qaa"}, UnsupportedLanguageError, "qaa"),
        ({"metadata": {"when": datetime(2026, 1, 1)}}, InvalidMetadataError, "JSON"),
        ({"metadata": {"obj": _NotJson()}}, InvalidMetadataError, "JSON"),
        ({"metadata": {"ratio": math.nan}}, InvalidMetadataError, "JSON"),
        ({"metadata": {1: "int key"}}, InvalidMetadataError, "keys must be strings"),
        ({"metadata": ["not", "a", "dict"]}, InvalidMetadataError, "must be a dict"),
        ({"metadata": {"s": "nul\x00"}}, InvalidMetadataError, "NUL"),
        ({"idempotency_key": ""}, InvalidJobError, "idempotency_key"),
    ],
)
def test_bad_input_is_rejected_and_nothing_is_written(
    settings: Settings, raw_redis: redis.Redis, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    args: dict[str, Any] = {"text": "Hello", "source_lang": "en", "target_lang": "fr", **kwargs}
    with Client(settings.model_copy(update={"max_text_chars": 100})) as client:
        with pytest.raises(error, match=message):
            client.submit(args.pop("text"), args.pop("source_lang"), args.pop("target_lang"), **args)
        _nothing_written(client, raw_redis)


def test_cancel_a_queued_job(client: Client) -> None:
    job_id = client.submit("Hello", "en", "fr")
    assert client.cancel(job_id).status is JobStatus.CANCELLED
    assert client.get(job_id).status is JobStatus.CANCELLED
    assert client.cancel(job_id).status is JobStatus.CANCELLED  # idempotent
    with pytest.raises(JobNotFoundError):
        client.cancel(str(uuid.uuid4()))


def test_cancel_a_finished_job_is_refused(client: Client, pg: Any) -> None:
    job_id = str(uuid.uuid4())
    pg.execute(
        "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text,"
        " created_at, finished_at, created_day) VALUES (%s, 'succeeded', 'en', 'fr', 'Hi', 'Salut', now(), now(),"
        " jobs_created_day(%s, now()))",
        (job_id, job_id),
    )
    with pytest.raises(JobNotCancellableError, match="already succeeded"):
        client.cancel(job_id)
    job = client.get(job_id)  # finished jobs are answered from PostgreSQL
    assert (job.status, job.translation, job.text) == (JobStatus.SUCCEEDED, "Salut", "Hi")


def test_wait_times_out_with_a_hint(client: Client) -> None:
    job_id = client.submit("Hello", "en", "fr")
    with pytest.raises(JobTimeoutError, match="still queued"):
        client.wait(job_id, timeout=0.2)


def test_keys_follow_the_prefix_and_overrides() -> None:
    keys = RedisKeys.from_settings(Settings(key_prefix="acme", events_channel="acme-live"))
    assert keys.jobs_stream == "{acme}:jobs"
    assert keys.events_stream == "{acme}:events"
    assert keys.events_channel == "acme-live"
    assert keys.state("abc") == "{acme}:job:abc"


def test_closing_the_client_ends_a_call_another_thread_is_waiting_in(client: Client) -> None:
    import threading

    job_id = client.submit("Hello", "en", "de")
    outcome: list[BaseException] = []

    def _wait() -> None:
        try:
            client.wait(job_id, timeout=30)
        except BaseException as exc:  # what the waiter is told
            outcome.append(exc)

    waiter = threading.Thread(target=_wait, daemon=True)
    waiter.start()
    waiter.join(0.3)
    client.close()
    waiter.join(5)
    assert not waiter.is_alive(), "the waiting thread was left waiting on a closed client"
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome


def test_an_option_submit_does_not_take_is_refused_not_dropped(client: Client, raw_redis: redis.Redis) -> None:
    # `priority` was the lane's keyword before it was renamed: dropped silently, a bulk job would
    # wait in the interactive lane, ahead of the interactive traffic it was meant to yield to.
    with pytest.raises(InvalidJobError, match=r"priority.*lane"):
        client.submit("Hello", "en", "de", priority="bulk")  # type: ignore[call-arg]
    with pytest.raises(InvalidJobError, match="glosary"):
        client.submit("Hello", "en", "de", glosary={"Hello": "Hallo"})  # type: ignore[call-arg]
    _nothing_written(client, raw_redis)


def test_many_threads_sharing_a_client_wait_for_a_connection_instead_of_failing(client: Client) -> None:
    # The synchronous client used to have a connection per thread as needed; its calls now share
    # the asyncio client's bounded pool, so more concurrent calls than connections must queue.
    import threading

    job_id = client.submit("Hello", "en", "de")
    errors: list[BaseException] = []
    start = threading.Barrier(64)

    def _look_up() -> None:
        start.wait()
        try:
            for _ in range(5):
                client.get(job_id)
        except BaseException as exc:  # what a caller is told
            errors.append(exc)

    threads = [threading.Thread(target=_look_up) for _ in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
