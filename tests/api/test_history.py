"""The tenant's history lists: ``GET /v1/jobs``, ``/v1/runs``, ``/v1/documents`` (real Redis, PostgreSQL, a worker)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.waiting import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(120)


async def _pages(http: httpx.AsyncClient, key: str, path: str, limit: int) -> list[list[dict[str, Any]]]:
    """Every page of a list, following ``next`` until it is null."""
    pages: list[list[dict[str, Any]]] = []
    before: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit} if before is None else {"limit": limit, "before": before}
        response = await http.get(path, params=params, headers=bearer(key))
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body["data"])
        before = body["next"]
        if before is None:
            return pages
        assert len(pages) < 50, "the pages never end"


async def _until_finished(http: httpx.AsyncClient, key: str, ids: list[str]) -> None:
    async def finished() -> bool:
        states = [(await http.get(f"/v1/jobs/{i}", headers=bearer(key))).json()["status"] for i in ids]
        return all(s in ("succeeded", "failed", "cancelled") for s in states)

    await until(finished, f"{len(ids)} jobs finished")


async def test_the_job_list_shows_queued_jobs_then_finished_ones_newest_first_a_page_at_a_time(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key, other = tenant_key("acme"), tenant_key("globex")
    ids: list[str] = []
    for i in range(5):  # one request each: distinct created_at, known order
        response = await http.post(
            "/v1/jobs", json={"text": f"Hello {i}.", "source_lang": "en", "target_lang": "fr"}, headers=bearer(key)
        )
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    run = await http.post(
        "/v1/runs?source_lang=en&target_lang=fr",
        content=b'{"custom_id": "a", "text": "A run line."}\n',
        headers={**bearer(key), "Content-Type": "application/x-ndjson"},
    )
    assert run.status_code == 202, run.text
    await http.post(
        "/v1/jobs", json={"text": "Theirs.", "source_lang": "en", "target_lang": "fr"}, headers=bearer(other)
    )

    queued = await _pages(http, key, "/v1/jobs", 2)
    assert [len(page) for page in queued] == [2, 2, 1]
    listed = [job for page in queued for job in page]
    assert [job["id"] for job in listed] == ids[::-1]  # newest first; the run's job is not a stand-alone job
    assert {job["status"] for job in listed} == {"queued"}

    async with start_worker(DeterministicEngine()):
        await _until_finished(http, key, ids)
    finished = await _pages(http, key, "/v1/jobs", 2)
    listed = [job for page in finished for job in page]
    assert [job["id"] for job in listed] == ids[::-1]
    assert {job["status"] for job in listed} == {"succeeded"}
    assert listed[0]["translation"] and listed[0]["finished_at"]

    theirs = (await http.get("/v1/jobs", headers=bearer(other))).json()
    assert len(theirs["data"]) == 1 and theirs["data"][0]["id"] not in ids and theirs["next"] is None


async def test_a_page_mixes_finished_and_queued_jobs_in_creation_order(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    first = [
        (
            await http.post(
                "/v1/jobs", json={"text": f"First {i}.", "source_lang": "en", "target_lang": "de"}, headers=bearer(key)
            )
        ).json()["id"]
        for i in range(3)
    ]
    async with start_worker(DeterministicEngine()):
        await _until_finished(http, key, first)
    later = [
        (
            await http.post(
                "/v1/jobs", json={"text": f"Later {i}.", "source_lang": "en", "target_lang": "de"}, headers=bearer(key)
            )
        ).json()["id"]
        for i in range(3)
    ]
    pages = await _pages(http, key, "/v1/jobs", 4)
    listed = [job for page in pages for job in page]
    assert [job["id"] for job in listed] == later[::-1] + first[::-1]
    assert [job["status"] for job in listed] == ["queued"] * 3 + ["succeeded"] * 3
    assert [len(page) for page in pages] == [4, 2]


async def test_runs_and_documents_list_newest_first_with_their_counts_name_and_format(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    key, other = tenant_key("acme"), tenant_key("globex")
    runs = []
    for n in range(3):
        lines = b"".join(
            json.dumps({"custom_id": f"c{i}", "text": f"Line {i}."}).encode() + b"\n" for i in range(n + 1)
        )
        response = await http.post(
            f"/v1/runs?source_lang=en&target_lang=fr&name=run{n}",
            content=lines,
            headers={**bearer(key), "Content-Type": "application/x-ndjson"},
        )
        assert response.status_code == 202, response.text
        runs.append(response.json()["id"])
    documents = []
    for name in ("a.md", "b.txt", "c.html"):
        response = await http.post(
            f"/v1/documents?source_lang=en&target_lang=fr&filename={name}", content=b"Hello.\n", headers=bearer(key)
        )
        assert response.status_code == 202, response.text
        documents.append(response.json()["id"])

    run_pages = await _pages(http, key, "/v1/runs", 2)
    listed = [run for page in run_pages for run in page]
    assert [run["id"] for run in listed] == runs[::-1]
    assert [run["counts"]["total"] for run in listed] == [3, 2, 1]
    assert [run["name"] for run in listed] == ["run2", "run1", "run0"]
    assert {run["kind"] for run in listed} == {"run"}

    doc_pages = await _pages(http, key, "/v1/documents", 2)
    listed = [doc for page in doc_pages for doc in page]
    assert [doc["id"] for doc in listed] == documents[::-1]
    assert [(doc["name"], doc["format"]) for doc in listed] == [("c.html", "html"), ("b.txt", "txt"), ("a.md", "md")]
    assert [len(page) for page in doc_pages] == [2, 1]

    for path in ("/v1/runs", "/v1/documents"):
        theirs = (await http.get(path, headers=bearer(other))).json()
        assert theirs == {"data": [], "next": None}


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/runs", "/v1/documents"])
async def test_a_bad_cursor_or_limit_is_refused(http: httpx.AsyncClient, tenant_key: KeyMaker, path: str) -> None:
    key = tenant_key("acme")
    response = await http.get(path, params={"before": "not-a-cursor"}, headers=bearer(key))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_cursor"
    for limit in (0, 101):
        assert (await http.get(path, params={"limit": limit}, headers=bearer(key))).status_code == 422
    assert (await http.get(path)).status_code == 401


async def test_the_default_page_is_twenty(http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings) -> None:
    key = tenant_key("acme")
    items = [{"text": f"Text {i}.", "source_lang": "en", "target_lang": "fr"} for i in range(23)]
    assert (await http.post("/v1/jobs", json=items, headers=bearer(key))).status_code == 202
    first = (await http.get("/v1/jobs", headers=bearer(key))).json()
    assert len(first["data"]) == 20 and first["next"]
    rest = (await http.get("/v1/jobs", params={"before": first["next"]}, headers=bearer(key))).json()
    assert len(rest["data"]) == 3 and rest["next"] is None
    assert not {j["id"] for j in first["data"]} & {j["id"] for j in rest["data"]}


def _forged(created: str, ident: str = "00000000-0000-0000-0000-000000000001") -> str:
    """A cursor built by hand (base64 of ``created:id``), as an attacker would."""
    return base64.urlsafe_b64encode(f"{created}:{ident}".encode()).decode().rstrip("=")


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/runs", "/v1/documents"])
@pytest.mark.parametrize("created", ["9" * 60, "-" + "9" * 60, "1_000", " 12", "12e3"])
async def test_a_forged_cursor_out_of_range_is_a_400_not_a_500(
    http: httpx.AsyncClient, tenant_key: KeyMaker, path: str, created: str
) -> None:
    key = tenant_key("acme")
    response = await http.get(path, params={"before": _forged(created)}, headers=bearer(key))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_cursor"


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/runs", "/v1/documents"])
async def test_a_forged_cursor_in_range_shows_only_the_callers_rows(
    http: httpx.AsyncClient, tenant_key: KeyMaker, path: str
) -> None:
    key, other = tenant_key("acme"), tenant_key("globex")
    await http.post(
        "/v1/jobs", json={"text": "Theirs.", "source_lang": "en", "target_lang": "fr"}, headers=bearer(other)
    )
    far_future = _forged(str(4_000_000_000 * 1_000_000), "ffffffff-ffff-ffff-ffff-ffffffffffff")
    response = await http.get(path, params={"before": far_future}, headers=bearer(key))
    assert response.status_code == 200, response.text
    assert response.json() == {"data": [], "next": None}


async def test_every_queued_job_of_one_big_request_is_listed_once_however_many_pages(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    key = tenant_key("acme")
    items = [{"text": f"Text {i}.", "source_lang": "en", "target_lang": "fr"} for i in range(150)]
    response = await http.post("/v1/jobs", json=items, headers=bearer(key))
    assert response.status_code == 202, response.text
    listed = [job["id"] for page in await _pages(http, key, "/v1/jobs", 20) for job in page]
    assert sorted(listed) == sorted(response.json()["ids"])
