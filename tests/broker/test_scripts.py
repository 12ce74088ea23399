"""Every Lua script, run directly through its wrapper on the real Redis: arguments in, keys and replies out."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.scripts import (
    MISSING,
    CancelOutcome,
    CancelScript,
    CountAfterScript,
    FinishedJob,
    FinishScript,
    LuaScript,
    Overdue,
    OverdueScript,
    RefillScript,
    RequeueScript,
    StartOutcome,
    StartScript,
    SubmitScript,
    UnfinishedStandaloneScript,
    cancel,
    count_after,
    finish,
    overdue,
    requeue,
    reserve,
    start,
    submit,
)
from broker.scripts.reserve import ReserveScript
from contract.schemas import JobSpec, JobStatus
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.wire import SCHEMA_VERSION, JobEvent, encode_job_entry

STATE_TTL = 5000
IDEMPOTENCY_TTL = 4000
FINISHED_TTL = 300
EVENTS_MAXLEN = 10_000
NOW = 1_700_000_123.25
CONSUMER = "worker-a"


@pytest.fixture
def keys(settings: Settings) -> RedisKeys:
    """The key names under this test's own prefix."""
    return RedisKeys.from_settings(settings)


@pytest.fixture
def control(raw_redis: redis.Redis, keys: RedisKeys) -> Iterator[Any]:
    """A subscription to the control channel."""
    pubsub = raw_redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(keys.control_channel)
    yield pubsub
    pubsub.close()


def _spec(**fields: Any) -> JobSpec:
    values: dict[str, Any] = {
        "job_id": str(uuid.uuid4()),
        "text": "Hello",
        "source_lang": "en",
        "target_lang": "fr",
        "created_at": 1_700_000_000.5,
    }
    return JobSpec(**(values | fields))


def _messages(pubsub: Any, count: int) -> list[str]:
    """The next ``count`` messages (payloads), however long they take."""
    received: list[str] = []
    while len(received) < count:
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            received.append(message["data"])
    return received


def _no_message(pubsub: Any, window_s: float = 1.0) -> bool:
    """Whether nothing is published within ``window_s`` (a window for what must not happen)."""
    return pubsub.get_message(timeout=window_s) is None


def _ttl_within(raw_redis: redis.Redis, key: str, most: int) -> bool:
    ttl: Any = raw_redis.ttl(key)
    return most - 10 <= int(ttl) <= most


def _entries(raw_redis: redis.Redis, stream: str) -> list[dict[str, str]]:
    """The fields of every entry of ``stream``, oldest first."""
    entries: Any = raw_redis.xrange(stream)
    return [fields for _, fields in entries]


def _record(raw_redis: redis.Redis, key: str) -> dict[str, str]:
    record: Any = raw_redis.hgetall(key)
    return dict(record)


async def _submit(script: SubmitScript, client: aioredis.Redis, spec: JobSpec, key: str | None = None) -> str:
    """Submit one job through the script's pipelined path; its id (or the first job's under ``key``)."""
    [job_id] = await script.call_many(client, [(spec, key)])
    return job_id


# The scripts' files ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", [submit, cancel, start, finish, requeue, count_after, overdue, reserve])
def test_each_script_is_loaded_under_the_sha_it_is_called_by(raw_redis: redis.Redis, module: Any) -> None:
    lua: LuaScript = module._LUA
    assert lua.filename.endswith(".lua") and "redis.call" in lua.source
    assert raw_redis.script_load(lua.source) == lua.sha


async def test_a_script_the_server_forgot_is_loaded_again(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    script = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
    raw_redis.script_flush()
    assert await _submit(script, async_redis, spec := _spec()) == spec.job_id
    raw_redis.script_flush()
    specs = [_spec(), _spec()]
    assert await script.call_many(async_redis, [(s, None) for s in specs]) == [s.job_id for s in specs]
    assert raw_redis.xlen(keys.jobs_stream) == 3  # the pipeline that met NOSCRIPT ran once, not twice
    assert raw_redis.script_exists(submit._LUA.sha) == [True]


# SUBMIT ---------------------------------------------------------------------------------------


async def test_submit_writes_the_entry_and_the_state_record(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    spec = _spec(metadata={"k": "v"}, run_id=str(uuid.uuid4()), sequence=3)
    assert await _submit(SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL), async_redis, spec) == spec.job_id
    assert _entries(raw_redis, keys.bulk_jobs_stream) == [encode_job_entry(spec)]
    assert raw_redis.hgetall(keys.state(spec.job_id)) == {
        "status": "queued",
        "created_at": "1700000000.5",
        "source_lang": "en",
        "target_lang": "fr",
        "attempts": "0",
    }
    assert _ttl_within(raw_redis, keys.state(spec.job_id), STATE_TTL)


async def test_start_recreates_a_missing_record_with_the_entry_s_tenant(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    # The record of a tenant's queued job expired (or was never written): recreated without the
    # tenant, the job would answer 404 to its own owner over the HTTP API.
    owned, unowned = _spec(tenant="acme"), _spec()
    outcomes = await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW, [owned, unowned])
    assert outcomes == [StartOutcome(MISSING, 1), StartOutcome(MISSING, 1)]
    assert raw_redis.hget(keys.state(owned.job_id), "tenant") == "acme"
    assert raw_redis.hget(keys.state(owned.job_id), "source_lang") == "en"
    assert "tenant" not in _record(raw_redis, keys.state(unowned.job_id))


async def test_submit_with_a_used_idempotency_key_returns_the_first_id(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    script = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
    first, second = _spec(), _spec(text="Hello again")
    assert await _submit(script, async_redis, first, "order-1") == first.job_id
    assert await _submit(script, async_redis, second, "order-1") == first.job_id
    assert await script.call_many(async_redis, [(second, "order-1"), (second, "order-2")]) == [
        first.job_id,
        second.job_id,
    ]
    assert [f["id"] for f in _entries(raw_redis, keys.jobs_stream)] == [first.job_id, second.job_id]
    assert raw_redis.get(keys.idempotency("order-1")) == first.job_id
    assert _ttl_within(raw_redis, keys.idempotency("order-1"), IDEMPOTENCY_TTL)


async def test_submit_that_cannot_xadd_leaves_nothing_behind(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    raw_redis.set(keys.jobs_stream, "not a stream")
    spec = _spec()
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        await _submit(SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL), async_redis, spec, "order-1")
    assert raw_redis.exists(keys.state(spec.job_id), keys.idempotency("order-1")) == 0
    assert raw_redis.get(keys.jobs_stream) == "not a stream"


# CANCEL ---------------------------------------------------------------------------------------


async def _submitted(async_redis: aioredis.Redis, keys: RedisKeys, *specs: JobSpec) -> None:
    await SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL).call_many(async_redis, [(spec, None) for spec in specs])


async def test_cancel_of_a_queued_job_keeps_it_cancelled_until_a_worker_finalises_it(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    spec = _spec()
    await _submitted(async_redis, keys, spec)
    assert await CancelScript(keys).call(async_redis, spec.job_id, NOW) is CancelOutcome.CANCELLED
    state = _record(raw_redis, keys.state(spec.job_id))
    assert state["status"] == "cancelled" and state["finished_at"] == repr(NOW)
    # No TTL: however old the backlog is when a worker reaches the entry, the cancel is there.
    assert raw_redis.ttl(keys.state(spec.job_id)) == -1
    [outcome] = await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW + 10, [spec])
    assert outcome == StartOutcome("cancelled", 0) and outcome.cancelled
    assert raw_redis.ttl(keys.state(spec.job_id)) == -1
    # The worker writes the cancelled row; FINISH finalises the record, which may now expire.
    [entry_id] = _delivered(raw_redis, keys, 1)
    event = _event(spec.job_id, JobStatus.CANCELLED)
    await FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN).call(async_redis, [entry_id], [FinishedJob(event)], NOW + 11)
    assert _record(raw_redis, keys.state(spec.job_id))["status"] == "cancelled"
    assert _ttl_within(raw_redis, keys.state(spec.job_id), FINISHED_TTL)


async def test_cancel_of_a_running_job_asks_its_worker(
    raw_redis: redis.Redis, keys: RedisKeys, control: Any, async_redis: aioredis.Redis
) -> None:
    spec = _spec()
    await _submitted(async_redis, keys, spec)
    await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW, [spec])
    outcome = await CancelScript(keys).call(async_redis, spec.job_id, NOW + 1)
    assert outcome is CancelOutcome.CANCEL_REQUESTED
    assert _messages(control, 1) == [f"cancel {spec.job_id}"]
    state = _record(raw_redis, keys.state(spec.job_id))
    assert state["status"] == "running" and state["cancel_requested"] == "1"
    assert "finished_at" not in state
    assert raw_redis.ttl(keys.state(spec.job_id)) == -1  # kept until a worker finishes it, not the cancel


async def test_start_of_a_job_whose_cancel_was_requested_does_not_run_it(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    spec, other = _spec(), _spec()
    await _submitted(async_redis, keys, spec, other)
    await StartScript(keys, STATE_TTL).call(async_redis, "dead-worker", NOW, [spec, other])
    assert await CancelScript(keys).call(async_redis, spec.job_id, NOW + 1) is CancelOutcome.CANCEL_REQUESTED
    before = _record(raw_redis, keys.state(spec.job_id))
    # The worker died before it could abort it; another one reclaims both entries.
    outcomes = await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW + 400, [spec, other])
    assert outcomes == [StartOutcome("cancelled", 1), StartOutcome("running", 2)]
    assert [o.cancelled for o in outcomes] == [True, False]
    assert _record(raw_redis, keys.state(spec.job_id)) == before  # not marked running again
    assert raw_redis.ttl(keys.state(spec.job_id)) == -1


async def test_cancel_of_an_unknown_job_is_missing_and_writes_nothing(
    raw_redis: redis.Redis, keys: RedisKeys, control: Any, async_redis: aioredis.Redis
) -> None:
    job_id = str(uuid.uuid4())
    assert await CancelScript(keys).call(async_redis, job_id, NOW) is CancelOutcome.MISSING
    assert raw_redis.exists(keys.state(job_id)) == 0
    assert _no_message(control)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        ("succeeded", CancelOutcome.SUCCEEDED),
        ("failed", CancelOutcome.FAILED),
        ("cancelled", CancelOutcome.CANCELLED),
    ],
)
async def test_cancel_of_a_final_job_changes_nothing(
    raw_redis: redis.Redis, keys: RedisKeys, status: str, outcome: CancelOutcome, async_redis: aioredis.Redis
) -> None:
    job_id = str(uuid.uuid4())
    record = {"status": status, "finished_at": "1.5", "attempts": "1"}
    raw_redis.hset(keys.state(job_id), mapping=dict[Any, Any](record))
    assert await CancelScript(keys).call(async_redis, job_id, NOW) is outcome
    assert _record(raw_redis, keys.state(job_id)) == record
    assert raw_redis.ttl(keys.state(job_id)) == -1  # no TTL was set


async def test_cancel_many_answers_in_order(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    queued, running = _spec(), _spec()
    await _submitted(async_redis, keys, queued, running)
    await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW, [running])
    job_ids = [running.job_id, str(uuid.uuid4()), queued.job_id, queued.job_id]
    assert await CancelScript(keys).call_many(async_redis, job_ids, NOW) == [
        CancelOutcome.CANCEL_REQUESTED,
        CancelOutcome.MISSING,
        CancelOutcome.CANCELLED,
        CancelOutcome.CANCELLED,  # already cancelled: nothing to do
    ]


# START ----------------------------------------------------------------------------------------


async def test_start_creates_a_missing_record(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    spec = _spec()  # XADDed by a producer that writes no state record
    [outcome] = await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW, [spec])
    assert outcome == StartOutcome(MISSING, 1) and not outcome.cancelled
    assert raw_redis.hgetall(keys.state(spec.job_id)) == {
        "status": "running",
        "created_at": "1700000000.5",
        "source_lang": "en",
        "target_lang": "fr",
        "started_at": repr(NOW),
        "consumer": CONSUMER,
        "attempts": "1",
    }
    assert _ttl_within(raw_redis, keys.state(spec.job_id), STATE_TTL)


async def test_start_counts_attempts_and_leaves_cancelled_jobs_alone(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    queued, cancelled, missing = _spec(), _spec(), _spec(source_lang="de")
    await _submitted(async_redis, keys, queued, cancelled)
    await CancelScript(keys).call(async_redis, cancelled.job_id, NOW)
    cancelled_record = raw_redis.hgetall(keys.state(cancelled.job_id))
    script = StartScript(keys, STATE_TTL)

    first = await script.call(async_redis, CONSUMER, NOW, [queued, cancelled, missing])
    assert first == [StartOutcome("queued", 1), StartOutcome("cancelled", 0), StartOutcome(MISSING, 1)]
    assert [o.cancelled for o in first] == [False, True, False]
    # A redelivery (the first worker died) counts one more attempt, under the new consumer.
    again = await script.call(async_redis, "worker-b", NOW + 5, [queued, cancelled, missing])
    assert again == [StartOutcome("running", 2), StartOutcome("cancelled", 0), StartOutcome("running", 2)]

    assert raw_redis.hgetall(keys.state(cancelled.job_id)) == cancelled_record
    assert raw_redis.hmget(keys.state(queued.job_id), "status", "consumer", "started_at", "attempts") == [
        "running",
        "worker-b",
        repr(NOW + 5),
        "2",
    ]
    assert raw_redis.hget(keys.state(missing.job_id), "source_lang") == "de"


async def test_start_of_no_jobs_returns_nothing(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    assert await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW, []) == []


# FINISH ---------------------------------------------------------------------------------------


def _delivered(raw_redis: redis.Redis, keys: RedisKeys, count: int) -> list[str]:
    """``count`` entries added to the jobs stream and read by the group (pending); their ids."""
    raw_redis.xgroup_create(keys.jobs_stream, keys.consumer_group, id="0", mkstream=True)
    with raw_redis.pipeline(transaction=False) as pipe:
        for n in range(count):
            pipe.xadd(keys.jobs_stream, {"n": n})
        entry_ids: list[str] = pipe.execute()
    raw_redis.xreadgroup(keys.consumer_group, CONSUMER, {keys.jobs_stream: ">"}, count=count)
    assert _pending(raw_redis, keys) == count
    return entry_ids


def _pending(raw_redis: redis.Redis, keys: RedisKeys) -> int:
    summary: Any = raw_redis.xpending(keys.jobs_stream, keys.consumer_group)
    return int(summary["pending"])


def _event(job_id: str, status: JobStatus = JobStatus.SUCCEEDED, error: str | None = None) -> JobEvent:
    return JobEvent(job_id=job_id, status=status, finished_at=NOW, error=error, prompt_tokens=3, output_tokens=4)


async def test_finish_acks_finalises_appends_and_publishes(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    entry_ids = _delivered(raw_redis, keys, 3)
    ok, failed = _spec(), _spec()
    await _submitted(async_redis, keys, ok, failed)
    await StartScript(keys, STATE_TTL).call(async_redis, CONSUMER, NOW, [ok, failed])
    events = [_event(ok.job_id), _event(failed.job_id, JobStatus.FAILED, "EngineError: x")]
    pubsub = raw_redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(keys.events_channel)

    script = FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN)
    # Three entries acked (the third was, say, malformed: no event), two jobs finished.
    assert await script.call(async_redis, entry_ids, [FinishedJob(e) for e in events], NOW) == 3

    assert _pending(raw_redis, keys) == 0
    assert raw_redis.hmget(keys.state(ok.job_id), "status", "finished_at", "error") == ["succeeded", repr(NOW), ""]
    assert raw_redis.hmget(keys.state(failed.job_id), "status", "error") == ["failed", "EngineError: x"]
    assert _ttl_within(raw_redis, keys.state(ok.job_id), FINISHED_TTL)
    assert _entries(raw_redis, keys.events_stream) == [e.to_fields() for e in events]
    assert [fields["v"] for fields in _entries(raw_redis, keys.events_stream)] == [SCHEMA_VERSION] * 2
    assert _messages(pubsub, 2) == [e.to_json() for e in events]
    pubsub.close()
    counter = keys.finished_in_second(int(NOW))
    assert raw_redis.get(counter) == "2"
    assert _ttl_within(raw_redis, counter, 120)
    assert raw_redis.xlen(keys.completions_stream) == 0  # no job of a run or document


async def test_finish_counts_each_second_apart_and_only_events(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    script = FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN)
    await script.call(async_redis, [], [FinishedJob(_event(str(uuid.uuid4())))], NOW)
    await script.call(async_redis, [], [FinishedJob(_event(str(uuid.uuid4()))) for _ in range(2)], NOW + 0.5)
    await script.call(async_redis, [], [FinishedJob(_event(str(uuid.uuid4())))], NOW + 1)
    await script.call(async_redis, [], [], NOW + 2)  # acks only: counts nothing
    assert raw_redis.mget([keys.finished_in_second(int(NOW) + n) for n in range(3)]) == ["3", "1", None]


async def test_finish_completes_a_group_exactly_once(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    run_id = str(uuid.uuid4())
    raw_redis.hset(keys.group(run_id), mapping={"kind": "run", "id": run_id, "total": "2"})
    first, second, other = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    script = FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN)

    async def finish(*jobs: FinishedJob) -> None:
        # The writer's way: queued on a MULTI/EXEC pipeline.
        async with async_redis.pipeline(transaction=True) as pipe:
            script.queue_on(pipe, [], list(jobs), NOW)
            assert await pipe.execute() == [0]

    await finish(FinishedJob(_event(first), run_id), FinishedJob(_event(other)))
    await finish(FinishedJob(_event(first), run_id))  # a duplicate delivery
    assert raw_redis.xlen(keys.completions_stream) == 0
    await finish(FinishedJob(_event(second), run_id))
    await finish(FinishedJob(_event(second), run_id), FinishedJob(_event(first), run_id))  # both again
    assert await script.call(async_redis, [], [FinishedJob(_event(second), run_id)], NOW) == 0

    assert _entries(raw_redis, keys.completions_stream) == [{"kind": "run", "id": run_id}]
    assert raw_redis.smembers(keys.group_done(run_id)) == {first, second}
    assert raw_redis.xlen(keys.events_stream) == 7  # every finish still appends its events


async def test_finish_on_a_pipeline_loads_a_script_the_server_forgot(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    entry_ids = _delivered(raw_redis, keys, 2)
    raw_redis.script_flush()
    async with async_redis.pipeline(transaction=True) as pipe:
        FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN).queue_on(pipe, entry_ids, [], NOW)
        pipe.xadd(keys.dead_letter_stream, {"reason": "x"})
        assert (await pipe.execute())[0] == 2
    assert _pending(raw_redis, keys) == 0
    assert raw_redis.xlen(keys.dead_letter_stream) == 1


async def test_finish_acks_more_entries_than_one_xack_takes(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    entry_ids = _delivered(raw_redis, keys, 1234)  # acked 500 at a time
    assert await FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN).call(async_redis, entry_ids, [], NOW) == 1234
    assert _pending(raw_redis, keys) == 0


# REQUEUE --------------------------------------------------------------------------------------


def _dead_letter(raw_redis: redis.Redis, keys: RedisKeys, spec: JobSpec) -> tuple[str, dict[str, str]]:
    fields = {**encode_job_entry(spec), "reason": "gave up", "entry_id": "1-0", "dead_lettered_at": "1.0"}
    dead_id = str(raw_redis.xadd(keys.dead_letter_stream, dict[Any, Any](fields)))
    raw_redis.hset(keys.state(spec.job_id), mapping={"status": "failed", "error": "gave up", "attempts": "3"})
    return dead_id, fields


async def test_requeue_puts_the_job_back_once(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    spec, kept = _spec(metadata={"k": "v"}), _spec()
    dead_id, fields = _dead_letter(raw_redis, keys, spec)
    _dead_letter(raw_redis, keys, kept)
    script = RequeueScript(keys, STATE_TTL)

    entry_id = await script.call(async_redis, dead_id, spec, fields, NOW)
    assert entry_id is not None
    assert raw_redis.xrange(keys.jobs_stream) == [(entry_id, encode_job_entry(spec))]
    assert raw_redis.hgetall(keys.state(spec.job_id)) == {
        "status": "queued",
        "created_at": repr(NOW),
        "source_lang": "en",
        "target_lang": "fr",
        "attempts": "0",
    }
    assert _ttl_within(raw_redis, keys.state(spec.job_id), STATE_TTL)
    assert [f["id"] for f in _entries(raw_redis, keys.dead_letter_stream)] == [kept.job_id]

    # Run again (a second operator, a retried call): nothing more happens.
    assert await script.call(async_redis, dead_id, spec, fields, NOW + 9) is None
    assert raw_redis.xlen(keys.jobs_stream) == 1
    assert raw_redis.hget(keys.state(spec.job_id), "created_at") == repr(NOW)
    assert raw_redis.xlen(keys.dead_letter_stream) == 1


async def test_requeue_gives_a_tenants_job_its_tenant_back(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    """The events feed and the queued-job limit read the tenant from the record: a retry keeps it."""
    spec = _spec(tenant="acme")
    dead_id, fields = _dead_letter(raw_redis, keys, spec)
    assert await RequeueScript(keys, STATE_TTL).call(async_redis, dead_id, spec, fields, NOW) is not None
    assert raw_redis.hget(keys.state(spec.job_id), "tenant") == "acme"
    assert raw_redis.zrange(keys.tenant_queued("acme"), 0, -1) == [spec.job_id]


async def test_requeue_that_cannot_xadd_leaves_nothing_behind(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    spec = _spec()
    dead_id, fields = _dead_letter(raw_redis, keys, spec)
    raw_redis.set(keys.jobs_stream, "not a stream")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        await RequeueScript(keys, STATE_TTL).call(async_redis, dead_id, spec, fields, NOW)
    assert raw_redis.xlen(keys.dead_letter_stream) == 1
    assert raw_redis.hget(keys.state(spec.job_id), "status") == "failed"


# COUNT_AFTER ----------------------------------------------------------------------------------


async def test_count_after_counts_later_entries_up_to_the_limit(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    entry_ids = [str(raw_redis.xadd(keys.jobs_stream, {"n": n})) for n in range(5)]
    script = CountAfterScript()
    assert await script.call(async_redis, keys.jobs_stream, entry_ids[1], 100) == 3
    assert await script.call(async_redis, keys.jobs_stream, entry_ids[1], 2) == 2
    assert await script.call(async_redis, keys.jobs_stream, "0-0", 100) == 5
    assert await script.call(async_redis, keys.jobs_stream, entry_ids[-1], 100) == 0


# OVERDUE --------------------------------------------------------------------------------------


async def test_overdue_counts_the_undelivered_entries_that_waited_long_enough(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    """Entry ids carry their XADD time: ids made 9, 6, 4 and 0.1 s ago wait that long (server clock)."""
    stream, group, script = keys.jobs_stream, keys.consumer_group, OverdueScript()
    assert await script.call(async_redis, stream, group, 1.0, 100) == Overdue(0, None)  # no stream yet
    now_ms = int(raw_redis.time()[0]) * 1000
    for ago_ms in (9_000, 6_000, 4_000, 100):
        raw_redis.xadd(stream, {"n": ago_ms}, id=f"{now_ms - ago_ms}-0")
    before_group = await script.call(async_redis, stream, group, 5.0, 100)
    assert before_group.count == 2 and 9.0 <= before_group.oldest_age_s < 11.0  # type: ignore[operator]
    raw_redis.xgroup_create(stream, group, id="0")
    raw_redis.xreadgroup(group, "a", {stream: ">"}, count=1)  # the 9 s one is delivered: no longer waiting
    found = await script.call(async_redis, stream, group, 3.0, 100)
    assert found.count == 2 and 6.0 <= found.oldest_age_s < 8.0  # type: ignore[operator]
    assert (await script.call(async_redis, stream, group, 3.0, 1)).count == 1  # up to the limit
    fresh = await script.call(async_redis, stream, group, 30.0, 100)
    assert fresh.count == 0 and fresh.oldest_age_s is not None and fresh.oldest_age_s >= 6.0  # none that old
    assert (await script.call(async_redis, stream, group, 0.0, 100)).count == 3  # no delay: all waiting
    raw_redis.xreadgroup(group, "a", {stream: ">"}, count=10)
    assert await script.call(async_redis, stream, group, 0.0, 100) == Overdue(0, None)  # all delivered


async def test_finish_keeps_a_done_set_only_while_its_group_lives(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    """The done-set expires with the group's hash, and is not recreated once the group is gone."""
    run_id = str(uuid.uuid4())
    raw_redis.hset(keys.group(run_id), mapping={"kind": "run", "id": run_id, "total": "3"})
    raw_redis.expire(keys.group(run_id), 1_000)
    script = FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN)
    await script.call(async_redis, [], [FinishedJob(_event(str(uuid.uuid4())), run_id)], NOW)
    assert 0 < raw_redis.ttl(keys.group_done(run_id)) <= 1_000
    raw_redis.delete(keys.group(run_id), keys.group_done(run_id))  # finished: the finish task deletes both
    await script.call(async_redis, [], [FinishedJob(_event(str(uuid.uuid4())), run_id)], NOW)  # a late duplicate
    assert not raw_redis.exists(keys.group_done(run_id))


# Tenants and the asyncio paths ----------------------------------------------------------------


async def test_submit_records_the_tenant_and_keeps_its_idempotency_keys_apart(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    script = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
    acme = await _submit(script, async_redis, _spec(tenant="acme"), "order-1")
    assert _record(raw_redis, keys.state(acme))["tenant"] == "acme"
    assert "tenant" not in _record(raw_redis, keys.state(await _submit(script, async_redis, _spec())))
    # The same key: a tenant-less submit and another tenant each get a job of their own.
    plain = await _submit(script, async_redis, _spec(), "order-1")
    globex = await _submit(script, async_redis, _spec(tenant="globex"), "order-1")
    assert len({acme, plain, globex}) == 3
    assert await _submit(script, async_redis, _spec(tenant="acme"), "order-1") == acme
    assert keys.idempotency("order-1", "acme") != keys.idempotency("acme:idem:order-1")


async def test_submit_and_cancel_pipelines_load_a_forgotten_script_and_answer_in_order(
    raw_redis: redis.Redis, keys: RedisKeys, service_urls: ServiceUrls
) -> None:
    client = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    try:
        submit_script = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
        specs = [_spec(tenant="acme"), _spec()]
        await client.script_flush()  # the async pipeline loads the script after NOSCRIPT too
        assert await submit_script.call_many(client, [(s, None) for s in specs]) == [s.job_id for s in specs]
        assert _entries(raw_redis, keys.jobs_stream) == [encode_job_entry(s) for s in specs]
        cancel_script = CancelScript(keys)
        assert await cancel_script.call(client, specs[0].job_id, time.time()) is CancelOutcome.CANCELLED
        outcomes = await cancel_script.call_many(client, [specs[1].job_id, str(uuid.uuid4())], time.time())
        assert outcomes == [CancelOutcome.CANCELLED, CancelOutcome.MISSING]
    finally:
        await client.aclose()


async def test_finish_names_the_tenant_and_group_and_uncounts_the_job(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    """What ``GET /v1/events`` filters on: the tenant and the run or document the worker gives."""
    script = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
    tenant_job = await _submit(script, async_redis, _spec(tenant="acme"))
    plain_job = await _submit(script, async_redis, _spec())
    assert raw_redis.zrange(keys.tenant_queued("acme"), 0, -1) == [tenant_job]  # the tenant's unfinished jobs
    assert _ttl_within(raw_redis, keys.tenant_queued("acme"), STATE_TTL)
    run_id = str(uuid.uuid4())
    await FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN).call(
        async_redis, [], [FinishedJob(_event(tenant_job), run_id, "acme"), FinishedJob(_event(plain_job))], NOW
    )
    tenant_entry, plain_entry = _entries(raw_redis, keys.events_stream)
    assert tenant_entry == {**_event(tenant_job).to_fields(), "tenant": "acme", "group": run_id}
    assert plain_entry == _event(plain_job).to_fields()
    assert raw_redis.zcard(keys.tenant_queued("acme")) == 0  # finished: no longer counted


async def test_finish_counts_a_whole_group_in_one_call_and_completes_it_once(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    """Members are added per group and uncounted per tenant, 500 at a time: one call may hold a whole run."""
    submit = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
    big, small = str(uuid.uuid4()), str(uuid.uuid4())
    raw_redis.hset(keys.group(big), mapping={"kind": "run", "id": big, "total": "1201"})
    raw_redis.expire(keys.group(big), 1_000)
    raw_redis.hset(keys.group(small), mapping={"kind": "document", "id": small, "total": "3"})
    big_jobs = [await _submit(submit, async_redis, _spec(tenant="acme")) for _ in range(1200)]
    small_jobs = [await _submit(submit, async_redis, _spec(tenant="globex")) for _ in range(2)]
    script = FinishScript(keys, FINISHED_TTL, EVENTS_MAXLEN)
    finished = [FinishedJob(_event(job), big, "acme") for job in big_jobs]
    finished += [FinishedJob(_event(j), small, "globex") for j in small_jobs]
    await script.call(async_redis, [], finished, NOW)
    assert raw_redis.xlen(keys.completions_stream) == 0  # 1200 of 1201, 2 of 3
    assert raw_redis.scard(keys.group_done(big)) == 1200
    assert 0 < raw_redis.ttl(keys.group_done(big)) <= 1_000  # a new done-set takes its group's TTL
    assert raw_redis.zcard(keys.tenant_queued("acme")) == 0
    assert raw_redis.zcard(keys.tenant_queued("globex")) == 0
    last_big, last_small = await _submit(submit, async_redis, _spec(tenant="acme")), str(uuid.uuid4())
    again = [FinishedJob(_event(big_jobs[0]), big, "acme"), FinishedJob(_event(last_big), big, "acme")]  # a duplicate
    await script.call(async_redis, [], [*again, FinishedJob(_event(last_small), small), *again], NOW)
    await script.call(async_redis, [], again, NOW)  # both delivered once more: nothing completes twice
    assert _entries(raw_redis, keys.completions_stream) == [
        {"kind": "run", "id": big},
        {"kind": "document", "id": small},
    ]


# RESERVE ---------------------------------------------------------------------------------------


async def test_reserve_admits_only_what_fits_and_counts_nothing_twice(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    script = ReserveScript(keys, STATE_TTL, 60)
    submit_script = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL)
    queued = keys.tenant_queued("acme")
    earlier = _spec(tenant="acme", created_at=NOW)
    await _submit(submit_script, async_redis, earlier, "order-1")
    raw_redis.zadd(queued, {"stale": NOW - STATE_TTL - 1})  # outlived the state records: pruned
    # Two named jobs: one under the idempotency key already used (SUBMIT answers the earlier job), one new.
    jobs = [("retry", "order-1"), ("fresh", None), (earlier.job_id, None)]
    assert (await script.admit(async_redis, "acme", 2, NOW, jobs=jobs))[:2] == (True, 1)
    assert sorted(raw_redis.zrange(queued, 0, -1)) == sorted([earlier.job_id, "fresh"])
    assert raw_redis.zscore(queued, earlier.job_id) == NOW  # an existing member keeps its score
    assert raw_redis.zscore(queued, "fresh") == NOW - STATE_TTL + 60  # reserved: ages out after the lease
    # Full: nothing is added, and the count says so.
    assert (await script.admit(async_redis, "acme", 2, NOW, jobs=[("third", None)]))[:2] == (False, 2)
    assert (await script.admit(async_redis, "acme", 4, NOW, token="run", counted=3))[:2] == (False, 2)
    assert raw_redis.zcard(queued) == 2 and not raw_redis.exists(keys.tenant_reservations("acme"))
    # A number reserved under a token counts with the set; claiming moves ids from it into the set.
    assert (await script.admit(async_redis, "acme", 4, NOW, token="run", counted=2))[:2] == (True, 2)
    assert (await script.admit(async_redis, "acme", 4, NOW, jobs=[("third", None)]))[:2] == (False, 4)
    assert await script.claim(async_redis, "acme", "run", ["r1"], NOW + 1) == 1
    assert (await script.admit(async_redis, "acme", 4, NOW + 1, jobs=[("third", None)]))[:2] == (False, 4)
    assert await script.claim(async_redis, "acme", "run", ["r2"], NOW + 2) == 0
    assert not raw_redis.hexists(keys.tenant_reservations("acme"), "run")  # fully claimed: gone
    # A reservation past its lease lapses, as do reserved jobs that were never submitted.
    assert (await script.admit(async_redis, "acme", 9, NOW, token="lost", counted=3))[:2] == (True, 4)
    assert (await script.admit(async_redis, "acme", 9, NOW + 100, token=""))[:2] == (True, 1)
    assert raw_redis.zrange(queued, 0, -1) == [earlier.job_id]
    assert not raw_redis.hexists(keys.tenant_reservations("acme"), "lost")


async def test_reserve_release_drops_only_jobs_that_are_not_queued(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    script = ReserveScript(keys, STATE_TTL, 60)
    queued = keys.tenant_queued("acme")
    spec = _spec(tenant="acme", created_at=NOW)
    assert (await script.admit(async_redis, "acme", 9, NOW, jobs=[(spec.job_id, None), ("never", None)])).admitted
    assert (await script.admit(async_redis, "acme", 9, NOW, token="run", counted=2)).admitted
    await _submit(SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL), async_redis, spec)
    assert raw_redis.zscore(queued, spec.job_id) == NOW  # SUBMIT re-scored it: it no longer ages out early
    raw_redis.hset(keys.state("done"), "status", "succeeded")
    raw_redis.zadd(queued, {"done": NOW})  # a finished job's id claimed again (a re-submitted run)
    await script.release(async_redis, "acme", "run", [spec.job_id, "never", "done"])
    assert raw_redis.zrange(queued, 0, -1) == [spec.job_id]
    assert not raw_redis.exists(keys.tenant_reservations("acme"))


# REFILL (fair share; the worker's side and the staging rules: tests/broker/test_fair_share.py) ---


async def test_refill_moves_staged_entries_into_the_lane_by_turns_exactly_once(
    raw_redis: redis.Redis, keys: RedisKeys, async_redis: aioredis.Redis
) -> None:
    lane = keys.jobs_stream
    raw_redis.xadd(lane, {"v": "1", "id": "first", "payload": "{}"})  # one unread entry: a full lane of buffer 1
    submit = SubmitScript(keys, STATE_TTL, IDEMPOTENCY_TTL, fair_share_buffer=1)
    acme = [_spec(tenant="acme") for _ in range(3)]
    globex = [_spec(tenant="globex")]
    await submit.call_many(async_redis, [(s, None) for s in acme + globex], weights={"acme": 2})
    assert raw_redis.xlen(lane) == 1 and raw_redis.lrange(keys.rotation(lane), 0, -1) == ["acme", "globex"]
    refilled = await RefillScript(keys, quantum=1).call(async_redis, lane, 10, ["acme", "globex"])
    assert (refilled.moved, refilled.unread, refilled.tenants) == (4, 1, ())
    ids = [fields["id"] for _, fields in raw_redis.xrange(lane)]
    assert ids == ["first", acme[0].job_id, acme[1].job_id, globex[0].job_id, acme[2].job_id]  # weight 2, then 1
    assert _entries(raw_redis, lane)[1] == encode_job_entry(acme[0])  # fields copied as they are
    assert not raw_redis.exists(keys.staging(lane, "acme"), keys.staging(lane, "globex"), keys.rotation(lane))
    again = await RefillScript(keys, quantum=1).call(async_redis, lane, 10, ["acme", "globex"])
    assert again.moved == 0 and raw_redis.xlen(lane) == 5


# UNFINISHED_STANDALONE ------------------------------------------------------------------------


async def test_unfinished_standalone_walks_down_keeping_unfinished_jobs_and_dropping_finished_ones(
    async_redis: aioredis.Redis, keys: RedisKeys
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    standalone, queued = keys.tenant_standalone(tenant), keys.tenant_queued(tenant)
    await async_redis.zadd(standalone, {f"job-{n}": 1_900_000_000 + n + 0.000001 for n in range(8)})
    await async_redis.zadd(queued, {f"job-{n}": 1.0 for n in (1, 2, 6)} | {"run-job": 1.0})
    script = UnfinishedStandaloneScript(keys)
    assert await script.call(async_redis, tenant, None, 2) == [
        ("job-6", 1_900_000_006.000001),  # scores come back exact
        ("job-2", 1_900_000_002.000001),
    ]
    assert await async_redis.zrange(standalone, 0, -1) == ["job-0", "job-1", "job-2", "job-6"]  # 3-5, 7 passed
    assert await script.call(async_redis, tenant, 1_900_000_002.000001, 5) == [
        ("job-2", 1_900_000_002.000001),
        ("job-1", 1_900_000_001.000001),
    ]
    assert await async_redis.zrange(standalone, 0, -1) == ["job-1", "job-2", "job-6"]
    assert await script.call(async_redis, f"nobody-{uuid.uuid4().hex[:8]}", None, 5) == []
