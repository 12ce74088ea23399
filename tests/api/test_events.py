"""``GET /v1/events``: Server-Sent Events over a real server (uvicorn), real Redis, a real worker."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cli.main import EXIT_OK, main
from contract.settings import Settings
from storage import ApiKeyStore
from tests.api.conftest import WAIT, KeyMaker, bearer
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)
JOB = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}


async def read_events(response: httpx.Response, count: int) -> list[dict[str, Any]]:
    """The next ``count`` events (``id``, ``event``, ``data``) of an open stream, however long they take to come;
    keep-alives skipped."""
    found: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    lines = response.aiter_lines()
    while len(found) < count:
        line = await anext(lines)
        if line == "":
            if "event" in event:
                found.append(event)
            event = {}
        elif line.startswith(":") or line.startswith("retry:"):
            continue
        else:
            name, _, value = line.partition(": ")
            event[name] = json.loads(value) if name == "data" else value
    return found


async def test_a_tenant_sees_its_own_completions_and_resumes_after_the_last_one(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    acme, globex = tenant_key("acme"), tenant_key("globex")
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:
        async with http.stream("GET", "/v1/events", headers=bearer(acme)) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            mine = (await http.post("/v1/jobs", json=[JOB] * 3, headers=bearer(acme))).json()["ids"]
            theirs = (await http.post("/v1/jobs", json=JOB, headers=bearer(globex))).json()["id"]
            async with start_worker(DeterministicEngine()):
                seen = await read_events(stream, 3)
        assert sorted(event["data"]["job_id"] for event in seen) == sorted(mine)
        assert theirs not in {event["data"]["job_id"] for event in seen}
        assert {event["event"] for event in seen} == {"job.finished"}
        assert {event["data"]["status"] for event in seen} == {"succeeded"}
        # Reconnecting after the first: the other two come again, from the stream, at once.
        resumed = {**bearer(acme), "Last-Event-ID": seen[0]["id"]}
        async with http.stream("GET", "/v1/events", headers=resumed) as stream:
            again = await read_events(stream, 2)
        assert [event["id"] for event in again] == [event["id"] for event in seen[1:]]


async def test_filter_by_run_and_by_job(api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory) -> None:
    key = tenant_key("acme")
    lines = b'{"custom_id": "a", "text": "One."}\n{"custom_id": "b", "text": "Two."}\n'
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:
        run = (await http.post("/v1/runs?source_lang=en&target_lang=fr", content=lines, headers=bearer(key))).json()
        single = (await http.post("/v1/jobs", json=JOB, headers=bearer(key))).json()["id"]
        async with (
            http.stream("GET", f"/v1/events?run_id={run['id']}&after=0-0", headers=bearer(key)) as by_run,
            http.stream("GET", f"/v1/events?job_id={single}&after=0-0", headers=bearer(key)) as by_job,
        ):
            async with start_worker(DeterministicEngine()):
                of_run = await read_events(by_run, 2)
                of_job = await read_events(by_job, 1)
    assert {event["data"]["group_id"] for event in of_run} == {run["id"]}
    assert of_job[0]["data"]["job_id"] == single and of_job[0]["data"]["group_id"] is None


async def test_a_trimmed_past_is_announced_and_a_bad_id_refused(
    api_url: str, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:
        await http.post("/v1/jobs", json=JOB, headers=bearer(key))
        async with start_worker(DeterministicEngine()):
            assert (await http.post(f"/v1/jobs?{WAIT}", json=JOB, headers=bearer(key))).status_code == 200
        # An id older than anything the stream holds: the first thing said is that events were trimmed.
        async with http.stream("GET", "/v1/events", headers={**bearer(key), "Last-Event-ID": "1-0"}) as stream:
            [gap] = await read_events(stream, 1)
        assert gap["event"] == "gap" and "trimmed" in gap["data"]["message"]
        refused = await http.get("/v1/events", headers={**bearer(key), "Last-Event-ID": "yesterday"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_event_id"
        assert (await http.get("/v1/events")).status_code == 401


async def test_a_quiet_streams_keep_alive_carries_no_id_and_it_ends_once_its_key_is_revoked(
    api_url: str,
    settings_env: Settings,
    key_store: ApiKeyStore,
    start_worker: WorkerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from api import event_feed

    monkeypatch.setattr(event_feed, "BLOCK_MS", 300)  # the server runs in this process (a thread)
    quiet, quiet_key = await key_store.create(f"quiet-{settings_env.key_prefix}")
    _, busy_key = await key_store.create(f"busy-{settings_env.key_prefix}")
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:
        async with http.stream("GET", "/v1/events", headers=bearer(quiet_key)) as stream:
            lines = stream.aiter_lines()
            async with start_worker(DeterministicEngine()):
                busy = (await http.post(f"/v1/jobs?{WAIT}", json=JOB, headers=bearer(busy_key))).json()
            assert busy["status"] == "succeeded"
            # Nothing of the other tenant's: not its event, and not its entry's id on a keep-alive
            # (issue 33: the keep-alive carried the newest entry id read, another tenant's).
            keep_alives = 0
            while keep_alives < 2:
                line = await anext(lines)
                assert not line.startswith(("data:", "id:")), line
                keep_alives += line == ": keep-alive"
            assert main(["api-key", "revoke", quiet.id]) == EXIT_OK
            async for _ in lines:  # the next keep-alive finds the key revoked: the stream ends
                pass
    capsys.readouterr()
