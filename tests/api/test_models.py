"""Several models over HTTP: ``GET /v1/models`` (and the ``openai`` SDK on it), ``model`` on jobs, unknown models
refused with ``404 model_not_found``, and a queued job of a model with no live worker saying what it waits for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
import redis
from fastapi import FastAPI

from api import create_app
from broker.keys import RedisKeys
from contract.models import ModelRoute
from contract.schemas import Lane
from contract.settings import Settings
from tests.api.conftest import WAIT, KeyMaker, bearer, with_unlimited_wait
from tests.api.test_openai_batches import call, jsonl, parse, poll, sdk
from tests.waiting import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}


@pytest.fixture
def routed(settings: Settings) -> Settings:
    """The test's settings with a route: Chinese sources go to ``hy`` (configured, served by nobody)."""
    return settings.model_copy(update={"model_routes": [ModelRoute(source="zh*", model="hy")]})


@pytest.fixture
async def api(routed: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The API on ``routed``, in-process (``?wait=`` not cut)."""
    app: FastAPI = create_app(with_unlimited_wait(routed))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
            yield client


def _serving(settings: Settings, *names: str) -> Settings:
    return settings.model_copy(update={"served_model_names": list(names)})


def _not_found(response: httpx.Response, *, openai_shape: bool) -> str:
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "model_not_found", error
    assert set(error) == ({"message", "type", "param", "code"} if openai_shape else {"code", "message"}), error
    return str(error["message"])


async def _final(api: httpx.AsyncClient, key: dict[str, str], job_id: str) -> dict[str, Any]:
    async def final() -> dict[str, Any] | None:
        job: dict[str, Any] = (await api.get(f"/v1/jobs/{job_id}", headers=key)).json()
        return job if job["status"] in ("succeeded", "failed", "cancelled") else None

    return await until(final, f"job {job_id} final")


async def test_v1_models_lists_configured_and_served_models_with_their_live_workers(
    api: httpx.AsyncClient, routed: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = bearer(tenant_key("acme"))
    before = (await api.get("/v1/models", headers=key)).json()
    assert before["object"] == "list"
    assert [(m["id"], m["default"], m["engines"]) for m in before["data"]] == [("default", True, 0), ("hy", False, 0)]
    assert before["data"][1]["routes"] == [{"source": "zh*", "target": "*", "lane": None}]
    assert before["data"][0]["created"] == 0 and before["data"][0]["owned_by"] == "dragoman"

    async with (
        start_worker(DeterministicEngine(), settings_=routed),
        start_worker(DeterministicEngine(model_name="/models/small"), settings_=_serving(routed, "small", "tiny")),
    ):
        listed = (await api.get("/v1/models", headers=key)).json()["data"]
        by_id = {model["id"]: model for model in listed}
        assert [model["id"] for model in listed] == ["default", "hy", "small"]  # the default first
        small = by_id["small"]
        assert small["object"] == "model" and small["aliases"] == ["tiny"] and small["default"] is False
        assert small["engines"] == 1 and small["created"] > 0 and small["routes"] == []
        (worker,) = small["workers"]
        assert worker["served_names"] == ["small", "tiny"] and worker["model_path"] == "/models/small"
        assert small["model_path"] == "/models/small" and small["profile"] == worker["profile"] and worker["profile"]
        assert by_id["default"]["engines"] == 1 and by_id["default"]["aliases"] == []
        assert by_id["hy"]["engines"] == 0 and by_id["hy"]["workers"] == []

        # An alias retrieves its model; an unknown name is OpenAI's 404 model_not_found.
        assert (await api.get("/v1/models/tiny", headers=key)).json()["id"] == "small"
        assert (await api.get("/v1/models/hy", headers=key)).json()["routes"][0]["source"] == "zh*"
        assert "gpt-4o-mini" in _not_found(await api.get("/v1/models/gpt-4o-mini", headers=key), openai_shape=True)
    # Stopped workers leave their models listed (their jobs would wait), with no live engine.
    after = {model["id"]: model for model in (await api.get("/v1/models", headers=key)).json()["data"]}
    assert after["small"]["engines"] == 0 and after["small"]["aliases"] == ["tiny"]
    assert (await api.get("/v1/models")).status_code == 401


async def test_the_openai_sdk_lists_and_retrieves_models(
    api_url: str, settings: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    client = sdk(api_url, tenant_key("acme"))
    async with start_worker(DeterministicEngine(), settings_=_serving(settings, "small", "tiny")):
        page = await call(client.models.list)
        assert [model.id for model in page.data] == ["default", "small"]
        small = await call(client.models.retrieve, "tiny")
        assert small.id == "small" and small.object == "model" and small.owned_by == "dragoman"
        assert small.model_extra is not None and small.model_extra["aliases"] == ["tiny"]
        with pytest.raises(openai.NotFoundError) as raised:
            await call(client.models.retrieve, "gpt-4o-mini")
    assert raised.value.code == "model_not_found"


async def test_jobs_naming_an_unknown_model_are_404_and_nothing_is_written(
    api: httpx.AsyncClient, routed: Settings, tenant_key: KeyMaker, raw_redis: redis.Redis
) -> None:
    key = bearer(tenant_key("acme"))
    message = _not_found(await api.post("/v1/jobs", json={**JOB, "model": "gpt-4o"}, headers=key), openai_shape=False)
    assert "'gpt-4o'" in message and "GET /v1/models" in message
    listed = [JOB, {**JOB, "model": "nope"}]
    assert "item 1" in _not_found(await api.post("/v1/jobs", json=listed, headers=key), openai_shape=False)
    keys = RedisKeys.from_settings(routed)
    assert all(raw_redis.xlen(keys.lane(lane, model)) == 0 for lane in Lane for model in ("default", "gpt-4o"))
    bad = await api.post("/v1/jobs", json={**JOB, "model": "has space"}, headers=key)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_job"


async def test_a_job_of_a_model_with_no_live_worker_says_what_it_waits_for(
    api: httpx.AsyncClient, routed: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = bearer(tenant_key("acme"))
    routed_job = (await api.post("/v1/jobs", json={**JOB, "source_lang": "zh"}, headers=key)).json()["id"]
    named = (await api.post("/v1/jobs", json={**JOB, "model": "hy"}, headers=key)).json()["id"]
    for job_id in (routed_job, named):
        job = (await api.get(f"/v1/jobs/{job_id}", headers=key)).json()
        assert job["status"] == "queued" and job["model"] == "hy"
        assert job["waiting_for"].startswith("waiting for a worker of model hy")
        assert "--served-model-name hy" in job["waiting_for"] and job["error"] is None

    async with start_worker(DeterministicEngine(), settings_=_serving(routed, "hy")):
        done = await _final(api, key, named)
    assert done["status"] == "succeeded" and done["model"] == "hy" and done["waiting_for"] is None


async def test_a_job_naming_an_alias_runs_on_its_model(
    api: httpx.AsyncClient, routed: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = bearer(tenant_key("acme"))
    async with start_worker(DeterministicEngine(), settings_=_serving(routed, "small", "tiny")):
        submitted = await api.post(f"/v1/jobs?{WAIT}", json={**JOB, "model": "tiny"}, headers=key)
        assert submitted.status_code == 200, submitted.text
        assert submitted.json()["model"] == "small" and submitted.json()["translation"] == JOB["text"]
        # A job of the default model waits while only `small` is served, and says so.
        waiting = (await api.post("/v1/jobs", json=JOB, headers=key)).json()["id"]
        job = (await api.get(f"/v1/jobs/{waiting}", headers=key)).json()
        assert job["waiting_for"] is not None and "model default" in job["waiting_for"]
        assert "`dragoman worker`" in job["waiting_for"]


def _line(custom_id: str, text: str, model: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"text": text, "source_lang": "en", "target_lang": "fr"}
    if model is not None:
        body["model"] = model
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/translations", "body": body}


async def test_a_batch_line_s_model_is_its_job_s_and_an_unknown_one_is_answered_in_the_error_file(
    api_url: str, settings: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    client = sdk(api_url, key)
    lines = [
        _line("alias", "one", "tiny"),
        _line("routed", "two"),
        _line("unknown", "three", "gpt-4o-mini"),
        _line("named", "four", "small"),
        _line("default", "five", "default"),
    ]
    async with (
        start_worker(DeterministicEngine(), settings_=settings),
        start_worker(DeterministicEngine(), settings_=_serving(settings, "small", "tiny")),
    ):
        uploaded = await call(client.files.create, file=("in.jsonl", jsonl(lines)), purpose="batch")
        batch = await call(
            client.batches.create,
            input_file_id=uploaded.id,
            endpoint="/v1/translations",  # type: ignore[arg-type]
            completion_window="24h",
        )
        assert batch.status == "in_progress", batch.errors  # an unknown model does not stop the batch
        done = await poll(client, batch.id, {"completed", "failed"})
        # A batch whose every line names an unknown model completes with an error file alone.
        refused = await call(client.files.create, file=("in.jsonl", jsonl([_line("x", "y", "nope")])), purpose="batch")
        only_unknown = await call(
            client.batches.create,
            input_file_id=refused.id,
            endpoint="/v1/translations",  # type: ignore[arg-type]
            completion_window="24h",
        )
        only_unknown = await poll(client, only_unknown.id, {"completed", "failed"})
    assert done.status == "completed" and done.output_file_id and done.error_file_id
    assert done.request_counts is not None and (done.request_counts.completed, done.request_counts.failed) == (4, 1)
    output = parse((await call(client.files.content, done.output_file_id)).read())
    answered = {line["custom_id"]: line["response"]["body"]["model"] for line in output}
    assert answered == {"alias": "small", "routed": "default", "named": "small", "default": "default"}
    [error] = parse((await call(client.files.content, done.error_file_id)).read())
    assert error["custom_id"] == "unknown" and error["error"]["code"] == "model_not_found"
    assert "'gpt-4o-mini'" in error["error"]["message"]
    assert error["response"]["status_code"] == 404
    assert error["response"]["body"]["error"]["code"] == "model_not_found"
    # The refused line is a failed job of the batch's tenant, like any other line.
    async with httpx.AsyncClient(base_url=api_url, headers=bearer(key)) as http:
        job = (await http.get(f"/v1/jobs/{error['response']['request_id']}")).json()
    assert job["status"] == "failed" and job["error"].startswith("model_not_found: ")

    assert only_unknown.status == "completed" and only_unknown.output_file_id is None and only_unknown.error_file_id
    assert only_unknown.request_counts is not None and only_unknown.request_counts.failed == 1


async def test_runs_and_documents_take_a_model_and_refuse_an_unknown_one(
    api: httpx.AsyncClient, routed: Settings, tenant_key: KeyMaker, raw_redis: redis.Redis
) -> None:
    key = bearer(tenant_key("acme"))
    keys = RedisKeys.from_settings(routed)
    run = b'{"custom_id": "a", "text": "one"}\n{"custom_id": "b", "text": "two"}\n'
    query = "source_lang=en&target_lang=fr"
    refused = await api.post(f"/v1/runs?{query}&model=nope", content=run, headers=key)
    assert "'nope'" in _not_found(refused, openai_shape=False)
    assert raw_redis.xlen(keys.lane(Lane.BULK, "default")) == 0
    accepted = await api.post(f"/v1/runs?{query}&model=hy", content=run, headers=key)
    assert accepted.status_code == 202, accepted.text
    assert raw_redis.xlen(keys.lane(Lane.BULK, "hy")) == 2 and raw_redis.xlen(keys.lane(Lane.BULK, "default")) == 0

    document = f"/v1/documents?{query}&format=txt"
    _not_found(await api.post(f"{document}&model=nope", content=b"Hello.", headers=key), openai_shape=False)
    assert (await api.post(f"{document}&model=hy", content=b"Hello.", headers=key)).status_code == 202


async def test_a_model_named_like_a_hub_id_or_a_path_is_retrieved_by_that_name(
    api: httpx.AsyncClient, routed: Settings, tenant_key: KeyMaker, raw_redis: redis.Redis
) -> None:
    key = bearer(tenant_key("acme"))
    names = {"meta-llama/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B-Instruct", "/models/hy": "/models/hy"}
    raw_redis.hset(RedisKeys.from_settings(routed).models, mapping=names)  # what workers registered
    for name in names:
        found = await api.get(f"/v1/models/{name}", headers=key)
        assert found.status_code == 200 and found.json()["id"] == name, found.text
