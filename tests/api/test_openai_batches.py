"""The OpenAI Batch API driven by the official ``openai`` SDK against a real server and worker.

The app runs under uvicorn in a thread on a free port; a worker on the deterministic engine
(identity profile: the translation is the text) runs on the test's loop. The SDK is synchronous,
so its calls go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import openai
import pytest
from openai import OpenAI

import tenancy.batches
from broker.keys import RedisKeys
from contract.ids import job_id_for
from contract.settings import Settings
from producer import AsyncClient
from storage import AsyncBatchStore, AsyncConnectionPool
from tenancy.batch_lines import numbered, parse_line
from tenancy.batches import batch_id_for
from tests import waiting
from tests.api.conftest import KeyMaker
from tests.waiting import FOREVER
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


def sdk(url: str, key: str) -> OpenAI:
    """The official client on this server."""
    return OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=FOREVER)


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking SDK call off the loop (the worker runs on it)."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    """A JSONL file of ``lines``."""
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def translation_line(custom_id: str, text: str, **body: Any) -> dict[str, Any]:
    """One ``/v1/translations`` request line."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/translations",
        "body": {"text": text, "source_lang": "en", "target_lang": "fr", **body},
    }


async def poll(client: OpenAI, batch_id: str, until: set[str]) -> Any:
    """Retrieve the batch until its status is one of ``until``, however long that takes."""

    async def reached() -> Any:
        batch = await call(client.batches.retrieve, batch_id)
        return batch if batch.status in until else None

    return await waiting.until(reached, f"batch {batch_id} {' or '.join(sorted(until))}")


async def create_over_http(http: httpx.AsyncClient, key: dict[str, str], lines: list[dict[str, Any]]) -> Any:
    """Upload ``lines`` and create a one-hour ``/v1/translations`` batch of them; the batch as answered."""
    uploaded = await http.post(
        "/v1/files", files={"file": ("in.jsonl", jsonl(lines))}, data={"purpose": "batch"}, headers=key
    )
    request = {"input_file_id": uploaded.json()["id"], "endpoint": "/v1/translations", "completion_window": "1h"}
    return (await http.post("/v1/batches", json=request, headers=key)).json()


def parse(content: bytes) -> list[dict[str, Any]]:
    """The lines of an output or error file."""
    return [json.loads(line) for line in content.decode().splitlines()]


async def test_a_batch_round_trip_through_the_sdk(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    client = sdk(api_url, tenant_key("acme"))
    lines = [translation_line(f"req-{n}", f"Hello number {n}", metadata={"n": n}) for n in range(12)]
    uploaded = await call(client.files.create, file=("input.jsonl", jsonl(lines)), purpose="batch")
    assert uploaded.object == "file" and uploaded.purpose == "batch" and uploaded.bytes == len(jsonl(lines))
    assert (await call(client.files.content, uploaded.id)).read() == jsonl(lines)

    batch = await call(
        client.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="24h",
        metadata={"project": "demo"},
    )
    assert batch.status == "in_progress" and batch.request_counts is not None
    assert batch.request_counts.total == 12 and batch.metadata == {"project": "demo"}

    async with start_worker(DeterministicEngine()):
        done = await poll(client, batch.id, {"completed", "failed"})
    assert done.status == "completed", done
    assert done.request_counts is not None and (done.request_counts.completed, done.request_counts.failed) == (12, 0)
    assert done.output_file_id and done.error_file_id is None and done.completed_at and done.finalizing_at

    output = parse((await call(client.files.content, done.output_file_id)).read())
    assert [line["custom_id"] for line in output] == [f"req-{n}" for n in range(12)]  # input order
    first = output[0]
    assert first["id"].startswith("batch_req_") and first["error"] is None
    assert first["response"]["status_code"] == 200
    assert first["response"]["body"]["translation"] == "Hello number 0"
    assert first["response"]["body"]["metadata"] == {"n": 0}
    assert first["response"]["body"]["usage"]["total_tokens"] > 0
    output_file = await call(client.files.retrieve, done.output_file_id)
    assert output_file.purpose == "batch_output"

    # Every line was an ordinary job: the native route finds it under the same tenant.
    job_id = first["response"]["request_id"]
    async with httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"Bearer {client.api_key}"}) as http:
        job = (await http.get(f"/v1/jobs/{job_id}")).json()
    assert job["status"] == "succeeded" and job["metadata"]["custom_id"] == "req-0"


async def test_failed_lines_go_to_the_error_file_with_their_reason(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    client = sdk(api_url, tenant_key("acme"))
    lines = [translation_line("ok-1", "fine"), translation_line("bad", "please FAIL"), translation_line("ok-2", "fine")]
    uploaded = await call(client.files.create, file=("in.jsonl", jsonl(lines)), purpose="batch")
    batch = await call(
        client.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="24h",
    )
    async with start_worker(DeterministicEngine(fail_if=lambda prompt: "FAIL" in prompt)):
        done = await poll(client, batch.id, {"completed", "failed"})
    assert done.status == "completed"
    assert done.request_counts is not None and (done.request_counts.completed, done.request_counts.failed) == (2, 1)
    assert done.output_file_id and done.error_file_id
    output = parse((await call(client.files.content, done.output_file_id)).read())
    errors = parse((await call(client.files.content, done.error_file_id)).read())
    assert [line["custom_id"] for line in output] == ["ok-1", "ok-2"]
    assert [line["custom_id"] for line in errors] == ["bad"]
    assert errors[0]["response"] is None and errors[0]["error"]["code"] == "request_failed"
    assert errors[0]["error"]["message"]


async def test_a_malformed_input_file_fails_validation_listing_every_bad_line(
    api_url: str, tenant_key: KeyMaker, settings: Settings
) -> None:
    client = sdk(api_url, tenant_key("acme"))
    content = b"\n".join(
        [
            json.dumps(translation_line("a", "fine")).encode(),
            b"{not json",
            json.dumps(translation_line("a", "duplicate id")).encode(),
            json.dumps(translation_line("c", "   ")).encode(),
            json.dumps({**translation_line("d", "x"), "url": "/v1/chat/completions"}).encode(),
            json.dumps(translation_line("e", "fine", target_lang="xx-nope")).encode(),
        ]
    )
    uploaded = await call(client.files.create, file=("bad.jsonl", content), purpose="batch")
    batch = await call(
        client.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="24h",
    )
    assert batch.status == "failed" and batch.failed_at and batch.errors and batch.errors.data
    found = {error.line: error.message or "" for error in batch.errors.data}
    assert sorted(found) == [2, 3, 4, 5, 6]
    assert "not JSON" in found[2]
    assert "already used on line 1" in found[3]
    assert "url" in found[5]
    assert batch.request_counts is not None and batch.request_counts.total == 0
    # Nothing was enqueued.
    import redis as redis_sync

    connection = redis_sync.Redis.from_url(settings.redis_url or "")
    try:
        assert connection.xlen(RedisKeys.from_settings(settings).bulk_jobs_stream) == 0
    finally:
        connection.close()


async def test_chat_and_completions_batches_run_as_raw_prompt_jobs(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    # The deterministic engine echoes its prompt: the output shows what the worker built. Its
    # tokenizer has no chat template, so a chat is "role: content" lines and "assistant:".
    client = sdk(api_url, tenant_key("acme"))
    chat_line = {
        "custom_id": "chat-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "default",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "max_completion_tokens": 64,
            "temperature": 0.7,
            "seed": 1,
            "stop": ["assistant"],
        },
    }
    completion_line = {
        "custom_id": "cmpl-1",
        "method": "POST",
        "url": "/v1/completions",
        "body": {"model": "default", "prompt": "Once upon a time", "max_tokens": 2},
    }
    batches = []
    for line in (chat_line, completion_line):
        uploaded = await call(client.files.create, file=("in.jsonl", jsonl([line])), purpose="batch")
        batch = await call(
            client.batches.create,
            input_file_id=uploaded.id,
            endpoint=line["url"],  # type: ignore[arg-type]
            completion_window="24h",
        )
        assert batch.status == "in_progress", batch.errors
        batches.append(batch.id)
    async with start_worker(DeterministicEngine()):
        chat_done = await poll(client, batches[0], {"completed", "failed"})
        completion_done = await poll(client, batches[1], {"completed", "failed"})
    assert chat_done.status == completion_done.status == "completed"
    assert chat_done.output_file_id and completion_done.output_file_id
    [chat] = parse((await call(client.files.content, chat_done.output_file_id)).read())
    body = chat["response"]["body"]
    assert chat["custom_id"] == "chat-1" and body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "system: Be brief.\nuser: Hi\n"}
    assert body["usage"]["prompt_tokens"] > 0
    [completion] = parse((await call(client.files.content, completion_done.output_file_id)).read())
    assert completion["response"]["body"]["object"] == "text_completion"
    text = completion["response"]["body"]["choices"][0]["text"]
    assert "Once upon a time".startswith(text) and text != "Once upon a time"  # cut at max_tokens
    assert completion["response"]["body"]["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["finish_reason"] == "stop"


async def test_cancel_mid_run(api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory) -> None:
    client = sdk(api_url, tenant_key("acme"))
    lines = [translation_line(f"r{n}", f"slow {n}") for n in range(40)]
    uploaded = await call(client.files.create, file=("in.jsonl", jsonl(lines)), purpose="batch")
    batch = await call(
        client.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="24h",
    )
    engine = DeterministicEngine(delay_s=0.2)
    async with start_worker(engine, max_in_flight=2):
        while engine.requests < 2:
            await asyncio.sleep(0.02)
        cancelling = await call(client.batches.cancel, batch.id)
        assert cancelling.status in {"cancelling", "cancelled"} and cancelling.cancelling_at
        done = await poll(client, batch.id, {"cancelled"})
    counts = done.request_counts
    assert counts is not None and counts.total == 40 and counts.completed + counts.failed == 40
    assert counts.failed > 0 and done.cancelled_at and done.error_file_id
    errors = parse((await call(client.files.content, done.error_file_id)).read())
    assert {line["error"]["code"] for line in errors} == {"request_cancelled"}
    if done.output_file_id:
        output = parse((await call(client.files.content, done.output_file_id)).read())
        assert len(output) == counts.completed
    with pytest.raises(openai.ConflictError):
        await call(client.batches.cancel, (await _completed_batch(client, start_worker)).id)


async def _completed_batch(client: OpenAI, start_worker: WorkerFactory) -> Any:
    uploaded = await call(client.files.create, file=("one.jsonl", jsonl([translation_line("x", "y")])), purpose="batch")
    batch = await call(
        client.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="24h",
    )
    async with start_worker(DeterministicEngine()):
        return await poll(client, batch.id, {"completed"})


async def test_list_with_pagination(api_url: str, tenant_key: KeyMaker) -> None:
    client = sdk(api_url, tenant_key("acme"))
    uploaded = await call(client.files.create, file=("in.jsonl", jsonl([translation_line("a", "b")])), purpose="batch")
    created = []
    for _ in range(5):
        batch = await call(
            client.batches.create,
            input_file_id=uploaded.id,
            endpoint="/v1/translations",  # type: ignore[arg-type]
            completion_window="24h",
        )
        created.append(batch.id)
    page = await call(client.batches.list, limit=2)
    assert [b.id for b in page.data] == created[::-1][:2] and page.has_more
    following = await call(client.batches.list, limit=2, after=page.data[-1].id)
    assert [b.id for b in following.data] == created[::-1][2:4]
    everything = [b.id for b in await call(lambda: list(client.batches.list(limit=2)))]
    assert everything == created[::-1]  # the SDK's auto-pagination follows last_id
    files = await call(client.files.list)
    assert [f.id for f in files.data] == [uploaded.id]


async def test_another_key_sees_neither_the_batch_nor_the_file(api_url: str, tenant_key: KeyMaker) -> None:
    owner, other = sdk(api_url, tenant_key("acme")), sdk(api_url, tenant_key("globex"))
    uploaded = await call(owner.files.create, file=("in.jsonl", jsonl([translation_line("a", "b")])), purpose="batch")
    batch = await call(
        owner.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="24h",
    )
    for attempt in (
        lambda: other.batches.retrieve(batch.id),
        lambda: other.batches.cancel(batch.id),
        lambda: other.files.retrieve(uploaded.id),
        lambda: other.files.content(uploaded.id),
        lambda: other.files.delete(uploaded.id),
        lambda: other.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/translations",  # type: ignore[arg-type]
            completion_window="24h",
        ),
    ):
        with pytest.raises(openai.NotFoundError) as raised:
            await call(attempt)
        assert raised.value.body is not None and "type" in raised.value.body  # type: ignore[operator]
    assert (await call(other.batches.list)).data == []
    assert (await call(other.files.list)).data == []
    assert (await call(owner.batches.retrieve, batch.id)).status == "in_progress"
    assert (await call(owner.files.delete, uploaded.id)).deleted
    with pytest.raises(openai.NotFoundError):
        await call(owner.files.retrieve, uploaded.id)


async def test_uploads_over_the_size_limit_and_bad_requests_answer_in_openai_s_shape(
    api_url: str, tenant_key: KeyMaker
) -> None:
    client = sdk(api_url, tenant_key("acme"))
    with pytest.raises(openai.APIStatusError) as raised:
        await call(client.files.create, file=("big.jsonl", b"x" * (200 * 1024)), purpose="batch")
    assert raised.value.status_code == 413
    with pytest.raises(openai.BadRequestError) as bad:
        await call(client.files.create, file=("in.jsonl", b"{}"), purpose="fine-tune")
    assert bad.value.code == "invalid_purpose" and bad.value.param == "purpose"
    uploaded = await call(client.files.create, file=("in.jsonl", jsonl([translation_line("a", "b")])), purpose="batch")
    with pytest.raises(openai.BadRequestError) as window:
        await call(
            client.batches.create,
            input_file_id=uploaded.id,
            endpoint="/v1/translations",  # type: ignore[arg-type]
            completion_window="soon",  # type: ignore[arg-type]
        )
    assert window.value.param == "completion_window"
    with pytest.raises(openai.AuthenticationError):
        await call(sdk(api_url, "dgm_wrong").batches.list)


async def test_a_batch_past_its_completion_window_expires_keeping_what_finished(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    client = sdk(api_url, tenant_key("acme"))
    lines = [translation_line(f"r{n}", f"text {n}") for n in range(5)]
    uploaded = await call(client.files.create, file=("in.jsonl", jsonl(lines)), purpose="batch")
    batch = await call(
        client.batches.create,
        input_file_id=uploaded.id,
        endpoint="/v1/translations",  # type: ignore[arg-type]
        completion_window="1s",  # type: ignore[arg-type]  # dragoman accepts any duration; OpenAI only "24h"
    )
    assert batch.expires_at is not None and batch.expires_at - batch.created_at <= 2

    async def expired() -> Any:  # no worker yet: nothing runs within the window
        batch_now = await call(client.batches.retrieve, batch.id)
        return batch_now if batch_now.expired_at else None

    noticed = await waiting.until(expired, "a read past the window notices it")
    assert noticed.status == "in_progress"  # its queued jobs are being cancelled
    async with start_worker(DeterministicEngine()):
        done = await poll(client, batch.id, {"expired"})
    assert done.request_counts is not None and done.request_counts.failed == 5 and done.output_file_id is None
    assert done.error_file_id
    errors = parse((await call(client.files.content, done.error_file_id)).read())
    assert [line["custom_id"] for line in errors] == [f"r{n}" for n in range(5)]
    assert {line["error"]["code"] for line in errors} == {"batch_expired"}


def readme_batch_example() -> str:
    """The Python block of the OpenAI Batch API guide (docs/guides/openai-batch-api.md)."""
    text = (ROOT / "docs" / "guides" / "openai-batch-api.md").read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert match, "docs/guides/openai-batch-api.md lost its example"
    return match.group(1)


async def test_the_readme_example_runs_as_written(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    source = readme_batch_example()
    assert 'base_url="http://127.0.0.1:8000/v1"' in source and 'api_key="dgm_..."' in source
    source = source.replace("http://127.0.0.1:8000", api_url).replace('"dgm_..."', repr(tenant_key("readme")))
    source = source.replace("time.sleep(1)", "time.sleep(0.1)")
    async with start_worker(DeterministicEngine()):
        await call(exec, compile(source, "openai-batch-api.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["greeting-0 Good morning", "greeting-1 See you tomorrow"]


async def test_a_batch_left_validating_by_a_dead_server_is_resumed_on_read_without_duplicates(
    api_url: str,
    make_key: KeyMaker,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    start_worker: WorkerFactory,
    pg: Any,
) -> None:
    tenant = f"crashed-{uuid.uuid4().hex[:8]}"
    client = sdk(api_url, make_key(tenant))
    lines = [translation_line(f"r{n}", f"text {n}") for n in range(3)]
    uploaded = await call(client.files.create, file=("in.jsonl", jsonl(lines)), purpose="batch")
    run_id = str(uuid.uuid4())
    batch_id = batch_id_for(run_id)
    pool = AsyncConnectionPool(settings.database_url or "", max_connections=1)
    async with AsyncClient(settings) as producer_client:
        try:  # what a server that died mid-create leaves: the row, validating, and line 0 enqueued
            await AsyncBatchStore(pool).create(
                batch_id, tenant, run_id, "/v1/translations", uploaded.id, "24h", 86_400, None
            )
        finally:
            await pool.close()
        _, spec = parse_line(jsonl(lines[:1]).strip(), "/v1/translations", max_chars=settings.max_text_chars)
        await producer_client.submitter.write([(numbered(spec, run_id, 0, tenant), None)], only_new=True)
        # ... and line 2 enqueued and finished long ago: its row is written, its state record expired.
        pg.execute(
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, created_at, "
            "finished_at, run_id, sequence, tenant, created_day) VALUES (%s, 'succeeded', 'en', 'fr', 'text 2', "
            "'text 2', now(), now(), %s, 2, %s, jobs_created_day(%s, now()))",
            (job_id_for(run_id, 2), run_id, tenant, job_id_for(run_id, 2)),
        )
        assert (await call(client.batches.retrieve, batch_id)).status == "validating"  # not stale yet
        monkeypatch.setattr(tenancy.batches, "VALIDATING_TIMEOUT_SECONDS", 0)
        resumed = await call(client.batches.retrieve, batch_id)
        assert resumed.status == "in_progress" and resumed.request_counts is not None
        assert resumed.request_counts.total == 3
        stream = RedisKeys.from_settings(settings).bulk_jobs_stream
        assert await producer_client.redis.xlen(stream) == 2  # line 0 was not enqueued twice, line 2 not again
    async with start_worker(DeterministicEngine()):
        done = await poll(client, batch_id, {"completed"})
    assert done.output_file_id
    output = parse((await call(client.files.content, done.output_file_id)).read())
    assert [line["response"]["body"]["translation"] for line in output] == ["text 0", "text 1", "text 2"]


async def test_a_slow_create_answers_validating_and_a_stopped_server_leaves_the_batch_to_the_next(
    settings: Settings, tenant_key: KeyMaker, raw_redis: Any, pg: Any
) -> None:
    """Past DRAGOMAN_API_BATCH_CREATE_WAIT_SECONDS the batch is returned validating, its creation going on;
    a server shut down mid-creation releases it, and the next read (another server's) finishes it."""
    from api import create_app

    key = {"Authorization": f"Bearer {tenant_key('slow')}"}
    lines = [translation_line(f"r{n}", f"text {n}") for n in range(5_000)]
    app = create_app(settings.model_copy(update={"api_batch_create_wait_seconds": 0}))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            created = await create_over_http(http, key, lines)
    assert created["status"] == "validating"  # answered at once; the server then stopped mid-creation
    released = pg.execute("SELECT status, claimed_at FROM batches WHERE id = %s", (created["id"],)).fetchone()
    assert released[0] == "validating" and released[1].year == 1970  # given up for the next reader
    successor = create_app(settings)
    async with successor.router.lifespan_context(successor):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=successor), base_url="http://t") as http:
            batch = (await http.get(f"/v1/batches/{created['id']}", headers=key)).json()
    assert batch["status"] == "in_progress" and batch["request_counts"]["total"] == 5_000, batch
    keys = RedisKeys.from_settings(settings)
    tenant = pg.execute("SELECT tenant FROM batches WHERE id = %s", (created["id"],)).fetchone()[0]
    lane = keys.bulk_jobs_stream  # past the fair-share buffer, the tenant's jobs wait in its staging stream
    queued = raw_redis.xlen(lane) + raw_redis.xlen(keys.staging(lane, tenant))
    assert queued == 5_000  # nothing queued twice


async def test_a_long_finalization_answers_finalizing_and_a_stopped_server_leaves_it_to_the_next(
    settings: Settings,
    tenant_key: KeyMaker,
    start_worker: WorkerFactory,
    pg: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read that claims a finished batch nobody follows waits FINALIZE_WAIT_SECONDS for the output file,
    then answers ``finalizing`` while it is written; a server shut down meanwhile releases the batch,
    and the next read (another server's) writes the output, once."""
    from api import create_app

    monkeypatch.setattr(tenancy.batches, "FINALIZE_WAIT_SECONDS", 0.0)
    monkeypatch.setattr(tenancy.batches, "MAX_FOLLOWING", 0)  # a server following batches already
    write_file = tenancy.batches.BatchService._write_file
    writing = asyncio.Event()

    async def slow_write_file(self: Any, *args: Any, **kwargs: Any) -> str:
        writing.set()
        await asyncio.sleep(3600)  # a very large output: still being written when the server stops
        return await write_file(self, *args, **kwargs)

    monkeypatch.setattr(tenancy.batches.BatchService, "_write_file", slow_write_file)
    key = {"Authorization": f"Bearer {tenant_key('final')}"}
    lines = [translation_line(f"r{n}", f"text {n}") for n in range(300)]
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            created = await create_over_http(http, key, lines)
            assert created["status"] == "in_progress"

            async def past_in_progress() -> dict[str, Any] | None:
                batch: dict[str, Any] = (await http.get(f"/v1/batches/{created['id']}", headers=key)).json()
                return None if batch["status"] == "in_progress" else batch

            async with start_worker(DeterministicEngine()):
                first = await waiting.until(past_in_progress, "the batch past in_progress")
            assert first["status"] == "finalizing" and first["finalizing_at"], first  # answered before the output
            assert first["request_counts"]["completed"] == 300
            await writing.wait()
    monkeypatch.setattr(tenancy.batches.BatchService, "_write_file", write_file)
    released = pg.execute("SELECT status, finalizing_at FROM batches WHERE id = %s", (created["id"],)).fetchone()
    assert released[0] == "finalizing" and released[1].year == 1970  # the stopped server gave it up
    successor = create_app(settings)
    async with successor.router.lifespan_context(successor):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=successor), base_url="http://t") as http:

            async def completed() -> dict[str, Any] | None:
                batch: dict[str, Any] = (await http.get(f"/v1/batches/{created['id']}", headers=key)).json()
                assert batch["status"] not in ("failed", "expired", "cancelled"), batch  # never to complete
                return batch if batch["status"] == "completed" else None

            batch = await waiting.until(completed, "the next server's read completes the batch")
            output = (await http.get(f"/v1/files/{batch['output_file_id']}/content", headers=key)).content
    assert [line["custom_id"] for line in parse(output)] == [f"r{n}" for n in range(300)]
    outputs = pg.execute(
        "SELECT count(*) FROM files WHERE purpose = 'batch_output' AND filename LIKE %s", (f"{created['id']}%",)
    )
    assert outputs.fetchone()[0] == 1  # the first server's cancelled write left no file behind
