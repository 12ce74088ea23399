"""The native job endpoints through an in-process ASGI client, on the real Redis and PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace

import httpx
import pytest
import redis
from fastapi import FastAPI

from api.services import Readiness
from broker.keys import RedisKeys
from contract.settings import Settings
from producer import Client
from storage import ApiKeyStore
from tests.api.conftest import WAIT, KeyMaker, bearer
from tests.waiting import FOREVER, until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}


def _error(response: httpx.Response, status: int, code: str) -> str:
    """Assert the one error shape, with ``status`` and ``code``; return the message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert "Traceback" not in response.text
    return str(body["error"]["message"])


async def test_health_needs_no_key(http: httpx.AsyncClient) -> None:
    response = await http.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


async def test_openapi_and_docs_are_served(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel", "/healthz"} <= set(schema["paths"])
    assert (await http.get("/docs")).status_code == 200
    flags = schema["components"]["schemas"]["JobView"]["properties"]["quality_flags"]
    assert "wrong_language" in flags["description"]


async def test_submit_one_then_get_it(
    http: httpx.AsyncClient, make_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key = make_key("acme")
    response = await http.post("/v1/jobs", json={**JOB, "metadata": {"doc": "a.txt"}}, headers=bearer(key))
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["status"] == "queued"
    job = (await http.get(f"/v1/jobs/{accepted['id']}", headers=bearer(key))).json()
    assert job["id"] == accepted["id"] and job["status"] == "queued" and job["attempts"] == 0
    assert job["quality_flags"] is None  # not checked (yet)
    assert job["source_lang"] == "en" and job["target_lang"] == "fr"
    # The tenant travels with the job: in its state record and in its wire payload.
    keys = RedisKeys.from_settings(settings)
    assert raw_redis.hget(keys.state(accepted["id"]), "tenant") == "acme"
    [(_, fields)] = raw_redis.xrange(keys.jobs_stream)  # type: ignore[misc]
    assert '"tenant":"acme"' in fields["payload"]  # type: ignore[index]


async def test_submit_a_list(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    key = make_key("acme")
    response = await http.post("/v1/jobs", json=[JOB, {**JOB, "target_lang": "de"}], headers=bearer(key))
    assert response.status_code == 202, response.text
    ids = response.json()["ids"]
    assert len(ids) == 2 and len(set(ids)) == 2
    for job_id in ids:
        assert (await http.get(f"/v1/jobs/{job_id}", headers=bearer(key))).json()["status"] == "queued"


async def test_controls_reach_the_wire_and_the_view(
    http: httpx.AsyncClient, make_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key, keys = make_key("acme"), RedisKeys.from_settings(settings)
    body = {**JOB, "source_lang": "auto", "glossary": {"morning": "matin"}, "context": "A greeting."}
    response = await http.post("/v1/jobs", json={**body, "formality": "formal", "memory": False}, headers=bearer(key))
    assert response.status_code == 202, response.text
    [(_, fields)] = raw_redis.xrange(keys.jobs_stream)  # type: ignore[misc]
    payload = fields["payload"]  # type: ignore[index]
    assert '"source_lang":"auto"' in payload and '"glossary":{"morning":"matin"}' in payload
    assert '"context":"A greeting."' in payload and '"formality":"formal"' in payload and '"memory":false' in payload
    job = (await http.get(f"/v1/jobs/{response.json()['id']}", headers=bearer(key))).json()
    assert job["glossary_misses"] is None and job["from_memory"] is False and job["detected_source_lang"] is None


async def test_a_job_names_its_lane(
    http: httpx.AsyncClient, make_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key, keys = make_key("acme"), RedisKeys.from_settings(settings)
    plain = (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).json()["id"]
    bulk = (await http.post("/v1/jobs", json={**JOB, "lane": "bulk"}, headers=bearer(key))).json()["id"]
    listed = (await http.post("/v1/jobs", json=[{**JOB, "lane": "bulk"}], headers=bearer(key))).json()["ids"]
    assert [f["id"] for _, f in raw_redis.xrange(keys.jobs_stream)] == [plain]
    assert [f["id"] for _, f in raw_redis.xrange(keys.bulk_jobs_stream)] == [bulk, *listed]


async def test_priority_the_lanes_deprecated_old_name_is_still_read(
    http: httpx.AsyncClient, make_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    key, keys = make_key("acme"), RedisKeys.from_settings(settings)
    old = (await http.post("/v1/jobs", json={**JOB, "priority": "bulk"}, headers=bearer(key))).json()["id"]
    listed = (await http.post("/v1/jobs", json=[{**JOB, "priority": "bulk"}], headers=bearer(key))).json()["ids"]
    same = {**JOB, "lane": "bulk", "priority": "bulk"}
    both = (await http.post("/v1/jobs", json=same, headers=bearer(key))).json()["id"]
    assert [f["id"] for _, f in raw_redis.xrange(keys.bulk_jobs_stream)] == [old, *listed, both]
    assert raw_redis.xlen(keys.jobs_stream) == 0


@pytest.mark.parametrize(
    ("body", "status", "code", "says"),
    [
        ({**JOB, "text": "  "}, 422, "empty_text", "empty"),
        ({**JOB, "text": "x" * 10_001}, 422, "text_too_long", "10,001"),
        ({**JOB, "source_lang": "klingon-xx-12345"}, 422, "unsupported_language", "klingon"),
        ({**JOB, "metadata": {"a": "\u0000"}}, 400, "invalid_value", "NUL"),  # refused at the door
        ({**JOB, "idempotency_key": " "}, 422, "invalid_job", "idempotency_key"),
        ({**JOB, "colour": "red"}, 422, "invalid_request", "colour: Extra inputs are not permitted"),
        ({"text": "hi", "source_lang": "en"}, 422, "invalid_request", "target_lang: Field required"),
        ([JOB, {**JOB, "text": 1}], 422, "invalid_request", "item 1: text: Input should be a valid string"),
        ("just a string", 422, "invalid_request", "a JSON object (one job) or a list"),
        ({**JOB, "text": 42}, 422, "invalid_request", "text"),
        ({**JOB, "metadata": [1, 2]}, 422, "invalid_request", "metadata"),
        ([JOB, {**JOB, "target_lang": "zz-invalid-code-x"}], 422, "unsupported_language", "item 1"),
        ([], 422, "invalid_request", "empty"),
        ({**JOB, "lane": "urgent"}, 422, "invalid_request", "lane: Input should be 'interactive' or 'bulk'"),
        ({**JOB, "priority": "urgent"}, 422, "invalid_request", "priority: Input should be 'interactive' or 'bulk'"),
        (
            {**JOB, "lane": "bulk", "priority": "interactive"},
            422,
            "invalid_request",
            "lane 'bulk' and priority 'interactive' (lane's deprecated old name) differ; send lane alone",
        ),
        ({**JOB, "glossary": {"morning": " "}}, 422, "invalid_glossary", "has an empty term"),
        ({**JOB, "glossary": {f"t{i}": "x" for i in range(201)}}, 422, "invalid_glossary", "at most 200"),
        (
            {**JOB, "glossary": {"morning": 3}},
            422,
            "invalid_request",
            "glossary.morning: Input should be a valid string",
        ),
        ({**JOB, "context": "x" * 4_001}, 422, "invalid_job", "at most 4,000"),
        ({**JOB, "formality": "polite"}, 422, "invalid_request", "formality: Input should be"),
        ({**JOB, "target_lang": "auto"}, 422, "unsupported_language", "auto"),
    ],
)
async def test_bad_input_writes_nothing(
    http: httpx.AsyncClient,
    make_key: KeyMaker,
    raw_redis: redis.Redis,
    settings: Settings,
    body: object,
    status: int,
    code: str,
    says: str,
) -> None:
    response = await http.post("/v1/jobs", json=body, headers=bearer(make_key("acme")))
    assert says in _error(response, status, code)
    keys = RedisKeys.from_settings(settings)
    assert raw_redis.exists(keys.jobs_stream) == raw_redis.exists(keys.bulk_jobs_stream) == 0


async def test_malformed_json_is_named(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    response = await http.post(
        "/v1/jobs", content=b'{"text": "hi",', headers={**bearer(make_key("acme")), "Content-Type": "application/json"}
    )
    assert "not valid JSON" in _error(response, 400, "invalid_json")


async def test_too_many_jobs_in_one_request(settings: Settings, make_key: KeyMaker) -> None:
    from api import create_app

    app = create_app(settings.model_copy(update={"api_max_jobs_per_request": 2}))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            response = await http.post("/v1/jobs", json=[JOB] * 3, headers=bearer(make_key("acme")))
    _error(response, 422, "too_many_jobs")


async def test_oversized_bodies_are_refused(settings: Settings, make_key: KeyMaker, raw_redis: redis.Redis) -> None:
    from api import create_app

    app = create_app(settings.model_copy(update={"api_max_body_bytes": 200}))
    key = make_key("acme")
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            declared = await http.post("/v1/jobs", json={**JOB, "text": "x" * 300}, headers=bearer(key))
            assert "over the limit" in _error(declared, 413, "body_too_large")

            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(10):
                    yield b"x" * 50

            streamed = await http.post(
                "/v1/jobs", content=chunks(), headers={**bearer(key), "Content-Type": "application/json"}
            )
            assert "over the limit" in _error(streamed, 413, "body_too_large")
            assert (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).status_code == 202
    assert raw_redis.xlen(RedisKeys.from_settings(settings).jobs_stream) == 1


async def test_unknown_route_and_method_use_the_error_shape(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    _error(await http.get("/v9/nothing"), 404, "not_found")
    _error(await http.delete("/v1/jobs", headers=bearer(make_key("acme"))), 405, "method_not_allowed")
    _error(await http.put("/healthz"), 405, "method_not_allowed")


ROUTES = [("POST", "/v1/jobs", JOB), ("GET", "/v1/jobs/{id}", None), ("POST", "/v1/jobs/{id}/cancel", None)]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_every_job_route_needs_a_valid_key(
    http: httpx.AsyncClient, make_key: KeyMaker, key_store: ApiKeyStore, method: str, path: str, body: object
) -> None:

    owner = make_key("acme")
    job_id = (await http.post("/v1/jobs", json=JOB, headers=bearer(owner))).json()["id"]
    url = path.format(id=job_id)

    missing = await http.request(method, url, json=body)
    _error(missing, 401, "missing_api_key")
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    _error(await http.request(method, url, json=body, headers=bearer("dgm_wrong")), 401, "invalid_api_key")
    _error(await http.request(method, url, json=body, headers={"Authorization": owner}), 401, "invalid_api_key")

    revoked = make_key("acme")
    [record] = [k for k in await key_store.list() if revoked.startswith(k.prefix) and k.tenant == "acme"][-1:]
    await key_store.revoke(record.id)
    _error(await http.request(method, url, json=body, headers=bearer(revoked)), 401, "invalid_api_key")


async def test_another_tenants_job_is_not_found_and_left_alone(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    acme, globex = make_key("acme"), make_key("globex")
    job_id = (await http.post("/v1/jobs", json=JOB, headers=bearer(acme))).json()["id"]
    unknown = "00000000-0000-4000-8000-000000000000"
    not_found_message = _error(await http.get(f"/v1/jobs/{unknown}", headers=bearer(globex)), 404, "job_not_found")
    other = _error(await http.get(f"/v1/jobs/{job_id}", headers=bearer(globex)), 404, "job_not_found")
    assert other == not_found_message.replace(unknown, job_id)  # indistinguishable from an unknown id
    _error(await http.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(globex)), 404, "job_not_found")
    assert (await http.get(f"/v1/jobs/{job_id}", headers=bearer(acme))).json()["status"] == "queued"
    _error(await http.get("/v1/jobs/not-a-uuid", headers=bearer(acme)), 404, "job_not_found")


async def test_idempotency_keys_are_per_tenant(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    acme, globex = make_key("acme"), make_key("globex")
    body = {**JOB, "idempotency_key": "order-42"}
    first = (await http.post("/v1/jobs", json=body, headers=bearer(acme))).json()["id"]
    again = (await http.post("/v1/jobs", json=body, headers=bearer(acme))).json()["id"]
    theirs = (await http.post("/v1/jobs", json=body, headers=bearer(globex))).json()["id"]
    assert first == again and theirs != first
    _error(await http.get(f"/v1/jobs/{theirs}", headers=bearer(acme)), 404, "job_not_found")


async def test_cancel_a_queued_job(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    key = make_key("acme")
    job_id = (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).json()["id"]
    cancelled = await http.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(key))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = await http.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(key))
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


async def test_wait_returns_the_finished_job(
    http: httpx.AsyncClient, make_key: KeyMaker, start_worker: WorkerFactory, pg: object
) -> None:
    acme, globex = make_key("acme"), make_key("globex")
    body = {**JOB, "idempotency_key": "order-7"}
    async with start_worker(DeterministicEngine()):
        response = await http.post(f"/v1/jobs?{WAIT}", json=body, headers=bearer(acme))
    assert response.status_code == 200, response.text
    # The same idempotency key again: the finished job, at once.
    again = await http.post("/v1/jobs", json=body, headers=bearer(acme))
    assert again.status_code == 200 and again.json() == response.json()
    job = response.json()
    assert job["status"] == "succeeded" and job["translation"] == JOB["text"]
    assert (job["finish_reason"], job["pieces"]) == ("stop", 1)
    assert job["quality_flags"] == {}  # checked, and clean (a two-word greeting is too short to judge)
    assert job["attempts"] == 1 and job["model"] and job["prompt_tokens"] is not None
    assert job["total_seconds"] is not None and job["finished_at"]
    # Finished: the row answers now, and it records the tenant too.
    assert pg.execute("SELECT tenant FROM jobs WHERE id = %s", (job["id"],)).fetchone() == ("acme",)  # type: ignore[attr-defined]
    assert (await http.get(f"/v1/jobs/{job['id']}", headers=bearer(acme))).json()["status"] == "succeeded"
    _error(await http.get(f"/v1/jobs/{job['id']}", headers=bearer(globex)), 404, "job_not_found")
    refused = await http.post(f"/v1/jobs/{job['id']}/cancel", headers=bearer(acme))
    assert "already succeeded" in _error(refused, 409, "job_not_cancellable")


async def _submitted_list(http: httpx.AsyncClient, key: str, jobs: list[dict[str, str]]) -> list[dict[str, object]]:
    """Submit ``jobs`` as one list and wait until each is final; their views, in order."""
    listed = await http.post("/v1/jobs", json=jobs, headers=bearer(key))
    assert listed.status_code == 202, listed.text

    async def final() -> list[dict[str, object]] | None:
        views = [(await http.get(f"/v1/jobs/{job_id}", headers=bearer(key))).json() for job_id in listed.json()["ids"]]
        return views if all(view["status"] in ("succeeded", "failed") for view in views) else None

    return await until(final, "the listed jobs finished")


async def test_source_auto_is_strict_unless_the_job_asks_for_a_best_guess(
    http: httpx.AsyncClient, make_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    """Issue 49: the native API keeps its strictness by default (a pipeline sees the failure and names the
    language); ``detection: best_guess`` (the console's) translates a short text, as the DeepL door does."""
    key = make_key("acme")
    short = {"text": "Save", "source_lang": "auto", "target_lang": "fr"}
    async with start_worker(DeterministicEngine()):
        strict = await http.post(f"/v1/jobs?{WAIT}", json=short, headers=bearer(key))
        guessed = await http.post(f"/v1/jobs?{WAIT}", json={**short, "detection": "best_guess"}, headers=bearer(key))
        german = "Guten Morgen, wie geht es Ihnen heute? Wir fahren morgen mit dem Zug nach Berlin."
        hallo, _ = await _submitted_list(
            http, key, [{**short, "text": text, "detection": "best_guess"} for text in ("Hallo", german)]
        )
    # in a list, a short text takes the language of the others (Hallo alone would be English, the default)
    assert hallo["status"] == "succeeded" and hallo["detected_source_lang"] == "de"
    assert strict.json()["status"] == "failed" and "could not be told with confidence" in strict.json()["error"]
    assert guessed.json()["status"] == "succeeded" and guessed.json()["detected_source_lang"] == "en"
    assert guessed.json()["source_lang"] == "auto"
    assert "detection" not in guessed.json()
    _error(
        await http.post("/v1/jobs", json={**short, "detection": "maybe"}, headers=bearer(key)), 422, "invalid_request"
    )


async def test_wait_that_runs_out_answers_202(http: httpx.AsyncClient, make_key: KeyMaker) -> None:
    response = await http.post("/v1/jobs?wait=0.2", json=JOB, headers=bearer(make_key("acme")))
    assert response.status_code == 202 and response.json()["status"] == "queued"
    _error(await http.post("/v1/jobs?wait=-1", json=JOB, headers=bearer(make_key("acme"))), 422, "invalid_request")
    _error(await http.post("/v1/jobs?wait=1", json=[JOB], headers=bearer(make_key("acme"))), 422, "invalid_request")


async def test_rate_limit_answers_429_with_retry_after(
    http: httpx.AsyncClient, make_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api import ratelimit

    # Mid-window, so that the three requests cannot straddle a minute boundary on a slow host.
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))
    key, other = make_key("acme", rate_limit_per_minute=2), make_key("acme")
    unknown = "/v1/jobs/00000000-0000-4000-8000-000000000000"
    assert (await http.get(unknown, headers=bearer(key))).status_code == 404
    assert (await http.get(unknown, headers=bearer(key))).status_code == 404
    limited = await http.get(unknown, headers=bearer(key))
    _error(limited, 429, "rate_limited")
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert (await http.get(unknown, headers=bearer(other))).status_code == 404  # per key


async def test_unexpected_errors_are_a_code_not_a_traceback(
    app: FastAPI, http: httpx.AsyncClient, make_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage import DatabaseUnavailableError

    key = make_key("acme")
    client = app.state.services.client
    unknown = "/v1/jobs/00000000-0000-4000-8000-000000000000"

    async def database_down(*args: object, **kwargs: object) -> None:
        raise DatabaseUnavailableError("connection refused to secret-host:5432")

    monkeypatch.setattr(client, "get", database_down)
    down = await http.get(unknown, headers=bearer(key))
    assert "secret-host" not in _error(down, 503, "service_unavailable")

    async def bug(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug with a secret in it")

    monkeypatch.setattr(client, "get", bug)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as raw:
        crashed = await raw.get(unknown, headers=bearer(key))
    assert "secret" not in _error(crashed, 500, "internal_error")


async def test_a_job_from_the_python_client_belongs_to_no_tenant(
    http: httpx.AsyncClient, make_key: KeyMaker, client: Client
) -> None:
    job_id = client.submit("Hello", "en", "fr")
    _error(await http.get(f"/v1/jobs/{job_id}", headers=bearer(make_key("acme"))), 404, "job_not_found")
    _error(await http.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(make_key("acme"))), 404, "job_not_found")
    assert client.get(job_id).status == "queued"


async def test_cancel_a_running_job(http: httpx.AsyncClient, make_key: KeyMaker, start_worker: WorkerFactory) -> None:
    key = make_key("acme")

    def status_is(expected: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return bool((await http.get(f"/v1/jobs/{job_id}", headers=bearer(key))).json()["status"] == expected)

        return check

    async with start_worker(DeterministicEngine(delay_s=FOREVER)):
        job_id = (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).json()["id"]
        await until(status_is("running"), "the job running")
        requested = await http.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(key))
        assert requested.status_code == 200 and requested.json()["status"] in ("running", "cancelled")
        waited = await http.post("/v1/jobs?wait=0", json=JOB, headers=bearer(key))  # wait=0: no wait at all
        assert waited.status_code == 202
        await until(status_is("cancelled"), "the running job cancelled")
        # That one is not left running for the worker's stop to wait out (its grace, 5 s).
        assert (await http.post(f"/v1/jobs/{waited.json()['id']}/cancel", headers=bearer(key))).status_code == 200


async def test_readyz_checks_both_services(http: httpx.AsyncClient, app: FastAPI) -> None:
    response = await http.get("/readyz")
    assert response.status_code == 200 and response.json() == {"status": "ready"}
    broken = app.state.services.settings.model_copy(update={"database_url": "postgresql://nobody@127.0.0.1:1/none"})
    # /readyz asks PostgreSQL on a session of its own, opened from the URL at start-up (issue 33)
    readiness = Readiness(broken.database_url or "")
    app.state.services = dataclasses.replace(app.state.services, settings=broken, readiness=readiness)
    response = await http.get("/readyz")
    assert response.status_code == 503 and response.json()["error"]["code"] == "not_ready"
