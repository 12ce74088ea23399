"""Retries: ``POST /v1/jobs/{id}/retry`` and ``POST /v1/documents/{id}/retry`` (worker, RQ tasks, Redis, PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from typing import Any

import httpx
import pytest

from api import create_app
from contract.ids import job_id_for
from contract.settings import Settings
from storage import AsyncConnectionPool
from storage.history import HistoryStore
from tests import waiting
from tests.api.conftest import KeyMaker, bearer, uvicorn_serving
from tests.api.test_runs_and_documents import until
from tests.docs.examples import ROOT, blocks
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


def _boom(text: str) -> bool:
    return "boom" in text


async def _submit(http: httpx.AsyncClient, key: str, text: str) -> str:
    """A stand-alone en→fr job of ``key``'s tenant; its id."""
    response = await http.post(
        "/v1/jobs", json={"text": text, "source_lang": "en", "target_lang": "fr"}, headers=bearer(key)
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _final(http: httpx.AsyncClient, key: str, job_id: str) -> dict[str, Any]:
    async def final() -> dict[str, Any] | None:
        job: dict[str, Any] = (await http.get(f"/v1/jobs/{job_id}", headers=bearer(key))).json()
        return job if job["status"] in ("succeeded", "failed", "cancelled") else None

    return await waiting.until(final, f"job {job_id} final")


async def test_a_failed_job_is_retried_as_a_new_job_with_its_text_languages_and_controls(
    http: httpx.AsyncClient, make_key: KeyMaker, tenant_key: KeyMaker, start_worker: WorkerFactory, settings: Settings
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    key, other = make_key(tenant), tenant_key("globex")
    body = {
        "text": "This goes boom.",
        "source_lang": "en",
        "target_lang": "de",
        "metadata": {"ticket": 7},
        "glossary": {"boom": "Knall"},
        "context": "A comic strip.",
        "formality": "formal",
        "lane": "bulk",
        "memory": False,
    }
    job_id = (await http.post("/v1/jobs", json=body, headers=bearer(key))).json()["id"]
    assert (await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))).json()["error"]["code"] == "not_retryable"
    async with start_worker(DeterministicEngine(fail_if=_boom)):
        assert (await _final(http, key, job_id))["status"] == "failed"
        assert (await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(other))).status_code == 404
        response = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
        assert response.status_code == 202, response.text
        new_id = response.json()["id"]
        assert new_id != job_id and response.json()["status"] == "queued"
        retried = await _final(http, key, new_id)
    assert retried["status"] == "failed" and retried["source_lang"] == "en" and retried["target_lang"] == "de"
    assert settings.database_url
    pool = AsyncConnectionPool(settings.database_url, max_connections=1)
    try:
        found = await HistoryStore(pool).job_to_retry(tenant, new_id)
    finally:
        await pool.close()
    assert found is not None
    job, controls = found
    assert job.text == "This goes boom." and job.metadata == {"ticket": 7}
    assert controls == {
        "glossary": {"boom": "Knall"},
        "context": "A comic strip.",
        "formality": "formal",
        "memory": False,
        "lane": "bulk",
    }


async def test_succeeded_queued_and_unknown_jobs_are_not_retried(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    job_id = await _submit(http, key, "Fine.")
    queued = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
    assert queued.status_code == 409 and "queued" in queued.json()["error"]["message"]
    async with start_worker(DeterministicEngine()):
        assert (await _final(http, key, job_id))["status"] == "succeeded"
    done = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
    assert done.status_code == 409 and done.json()["error"]["code"] == "not_retryable"
    assert (
        await http.post("/v1/jobs/00000000-0000-4000-8000-000000000000/retry", headers=bearer(key))
    ).status_code == 404
    assert (await http.post("/v1/jobs/nonsense/retry", headers=bearer(key))).status_code == 404


async def test_a_cancelled_job_is_retried_once_a_worker_recorded_it(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    job_id = await _submit(http, key, "Later.")
    assert (await http.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(key))).json()["status"] == "cancelled"
    early = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
    assert early.status_code == 409 and "worker" in early.json()["error"]["message"]

    async def taken() -> httpx.Response | None:
        response = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
        return response if response.status_code == 202 else None

    async with start_worker(DeterministicEngine()):
        response = await waiting.until(taken, "the retry taken, once the worker recorded the cancel")
        retried = await _final(http, key, response.json()["id"])
    assert retried["status"] == "succeeded" and retried["translation"]


async def test_a_retry_waits_its_turn_in_the_keys_limit(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme", max_queued_jobs=1)
    job_id = await _submit(http, key, "boom")
    async with start_worker(DeterministicEngine(fail_if=_boom)):
        assert (await _final(http, key, job_id))["status"] == "failed"
    blocker = await http.post(
        "/v1/jobs", json={"text": "Wait.", "source_lang": "en", "target_lang": "fr"}, headers=bearer(key)
    )
    assert blocker.status_code == 202
    refused = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_queued_jobs"


async def test_a_document_with_failed_segments_is_retried_from_its_source_and_options(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key, other = tenant_key("acme"), tenant_key("globex")
    source = b"# Title\n\nThis goes boom.\n\nAll fine here.\n"
    response = await http.post(
        "/v1/documents?source_lang=en&target_lang=fr&filename=notes.md&formality=informal&context=A+blog",
        content=source,
        headers=bearer(key),
    )
    assert response.status_code == 202, response.text
    first = response.json()["id"]
    running = await http.post(f"/v1/documents/{first}/retry", headers=bearer(key))
    assert running.status_code == 409 and running.json()["error"]["code"] == "not_retryable"

    async def assembled(document_id: str) -> bool:
        view = (await http.get(f"/v1/documents/{document_id}", headers=bearer(key))).json()
        return bool(view["status"] in ("completed", "failed", "cancelled"))

    async with start_worker(DeterministicEngine(fail_if=_boom)):
        await until(lambda: assembled(first), "the first document finished")
        view = (await http.get(f"/v1/documents/{first}", headers=bearer(key))).json()
        assert view["counts"]["failed"] == 1 and view["failed_segments"]
        assert (await http.post(f"/v1/documents/{first}/retry", headers=bearer(other))).status_code == 404
        response = await http.post(f"/v1/documents/{first}/retry", headers=bearer(key))
        assert response.status_code == 202, response.text
        second = response.json()
        assert second["id"] != first and second["kind"] == "document" and second["name"] == "notes.md"
        await until(lambda: assembled(second["id"]), "the retry finished")
    content = await http.get(f"/v1/documents/{second['id']}/content", headers=bearer(key))
    assert content.status_code == 200 and content.text.startswith("# ")
    listed = (await http.get("/v1/documents", headers=bearer(key))).json()["data"]
    assert [doc["id"] for doc in listed] == [second["id"], first]


async def test_a_cancelled_document_is_retried_and_a_clean_one_is_not(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    first = (
        await http.post(
            "/v1/documents?source_lang=en&target_lang=fr&format=txt", content=b"Hello.\n", headers=bearer(key)
        )
    ).json()["id"]
    assert (await http.post(f"/v1/documents/{first}/cancel", headers=bearer(key))).status_code == 200

    async def final(document_id: str) -> bool:
        view = (await http.get(f"/v1/documents/{document_id}", headers=bearer(key))).json()
        return bool(view["status"] in ("completed", "failed", "cancelled"))

    await until(lambda: final(first), "the first document cancelled")
    response = await http.post(f"/v1/documents/{first}/retry", headers=bearer(key))
    assert response.status_code == 202, response.text
    second = response.json()["id"]
    async with start_worker(DeterministicEngine()):
        await until(lambda: final(second), "the retry finished")
    assert (await http.get(f"/v1/documents/{second}", headers=bearer(key))).json()["status"] == "completed"
    clean = await http.post(f"/v1/documents/{second}/retry", headers=bearer(key))
    assert clean.status_code == 409 and "no failed segments" in clean.json()["error"]["message"]
    assert (await http.post("/v1/documents/nonsense/retry", headers=bearer(key))).status_code == 404


async def test_a_failed_job_of_a_run_is_not_retried_on_its_own(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    run = await http.post(
        "/v1/runs?source_lang=en&target_lang=fr",
        content=b'{"custom_id": "a", "text": "It goes boom."}\n',
        headers={**bearer(key), "Content-Type": "application/x-ndjson"},
    )
    assert run.status_code == 202, run.text
    job_id = job_id_for(run.json()["id"], 0)
    async with start_worker(DeterministicEngine(fail_if=_boom)):
        assert (await _final(http, key, job_id))["status"] == "failed"
    response = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))
    assert response.status_code == 409 and "a line of run" in response.json()["error"]["message"]


async def test_the_http_guide_s_history_and_retry_example_runs_as_written(
    settings: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    """docs/guides/http-api.md's history block, run with curl and jq against a served API: the list, two retries."""
    (block,) = [b for b in blocks(ROOT / "docs/guides/http-api.md") if "/retry" in b.code]
    key = tenant_key("acme")
    with uvicorn_serving(create_app(settings)) as url:
        async with httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=None) as http:
            failed = (
                await http.post("/v1/jobs", json={"text": "It goes boom.", "source_lang": "en", "target_lang": "fr"})
            ).json()["id"]
            document = (
                await http.post("/v1/documents?source_lang=en&target_lang=fr&format=txt", content=b"Hello.\n")
            ).json()["id"]
            assert (await http.post(f"/v1/documents/{document}/cancel")).status_code == 200

            async def cancelled() -> bool:
                return bool((await http.get(f"/v1/documents/{document}")).json()["status"] == "cancelled")

            await until(cancelled, "the document cancelled")
            async with start_worker(DeterministicEngine(fail_if=_boom)):
                assert (await _final(http, key, failed))["status"] == "failed"
            env = {**os.environ, "AUTH": f"Authorization: Bearer {key}", "API": url, "JOB": failed, "DOC": document}
            shell = await asyncio.create_subprocess_exec(
                "bash", "-euo", "pipefail", "-c", block.code, env=env, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await shell.communicate()
    assert shell.returncode == 0, out
    text = out.decode()
    assert f'{{\n  "id": "{failed}",\n  "status": "failed"\n}}\nnull\n' in text, text  # the list, by jq
    job = re.search(r'\{"id":"([0-9a-f-]+)","status":"queued"\}', text)  # curl's answers, on one line
    retried_document = re.search(r'\{"id":"([0-9a-f-]+)","kind":"document","status":"splitting"', text)
    assert job and retried_document, text  # the two retries
    assert not {failed, document} & {job[1], retried_document[1]}


async def test_two_retries_of_one_job_at_once_queue_one_new_job_and_its_retry_another(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    job_id = await _submit(http, key, "boom")
    async with start_worker(DeterministicEngine(fail_if=_boom)):
        assert (await _final(http, key, job_id))["status"] == "failed"
        answers = await asyncio.gather(*(http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key)) for _ in range(5)))
        assert [a.status_code for a in answers] == [202] * 5, [a.text for a in answers]
        new_ids = {a.json()["id"] for a in answers}
        assert len(new_ids) == 1 and job_id not in new_ids  # a double click is one retry
        (new_id,) = new_ids
        assert (await _final(http, key, new_id))["status"] == "failed"
        later = await http.post(f"/v1/jobs/{job_id}/retry", headers=bearer(key))  # the first job asked again
        assert later.status_code == 202 and later.json() == {"id": new_id, "status": "failed"}
        again = await http.post(f"/v1/jobs/{new_id}/retry", headers=bearer(key))  # a retry of the retry
        assert again.status_code == 202 and again.json()["id"] not in (job_id, new_id)
        await _final(http, key, again.json()["id"])
    listed = [job["id"] for job in (await http.get("/v1/jobs", headers=bearer(key))).json()["data"]]
    assert listed == [again.json()["id"], new_id, job_id]


@pytest.mark.parametrize("document_id", ["nonsense", "00000000-0000-4000-8000-000000000000", "' OR 1=1 --"])
async def test_a_retry_of_an_unknown_or_malformed_document_is_a_404(
    http: httpx.AsyncClient, tenant_key: KeyMaker, document_id: str
) -> None:
    response = await http.post(f"/v1/documents/{document_id}/retry", headers=bearer(tenant_key("acme")))
    assert response.status_code == 404, response.text
