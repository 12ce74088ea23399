"""A batch's output file written while its jobs finish: by the server that enqueued it, taken over
when that server stops or dies, one complete file in the end and nothing left behind.

Lines whose job already has a row are what a follower writes; a few rows are written here by
hand (as the worker would have) so that the batch stays part-finished for as long as a test looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

import tenancy.batch_output
from contract.ids import job_id_for
from contract.settings import Settings
from storage import AsyncConnectionPool, PostgresFileStore
from tests.api.conftest import KeyMaker
from tests.api.test_openai_batches import create_over_http, parse, translation_line
from tests.waiting import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

LINES = 40
EARLY = 15


@pytest.fixture(autouse=True)
def _fast_following(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tenancy.batch_output, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(tenancy.batch_output, "APPEND_BYTES", 1)  # every line appended at once


def _finish_early_lines(pg: Any, run_id: str, tenant: str) -> None:
    """Rows for the first EARLY lines, as if the worker had translated them (``early n``)."""
    for n in range(EARLY):
        pg.execute(
            "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, created_at, "
            "finished_at, run_id, sequence, tenant, metadata, created_day) VALUES (%s, 'succeeded', 'en', 'fr', %s, "
            "%s, now(), now(), %s, %s, %s, %s, jobs_created_day(%s, now())) ON CONFLICT (id, created_day) DO NOTHING",
            (
                job_id_for(run_id, n),
                f"text {n}",
                f"early {n}",
                run_id,
                n,
                tenant,
                json.dumps({"custom_id": f"r{n}"}),
                job_id_for(run_id, n),
            ),
        )


def _batch(pg: Any, batch_id: str) -> dict[str, Any]:
    cursor = pg.execute(
        "SELECT status, run_id::text, tenant, follower, follow_until, partial_output_file_id "
        "FROM batches WHERE id = %s",
        (batch_id,),
    )
    row = cursor.fetchone()
    return dict(zip(("status", "run_id", "tenant", "follower", "follow_until", "partial"), row, strict=True))


def _written_lines(pg: Any, file_id: str) -> list[dict[str, Any]]:
    chunks = pg.execute("SELECT data FROM file_chunks WHERE file_id = %s ORDER BY seq", (file_id,)).fetchall()
    return parse(b"".join(bytes(chunk) for (chunk,) in chunks))


@contextlib.asynccontextmanager
async def _serving(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            yield http


async def _started_batch(http: httpx.AsyncClient, key: dict[str, str], pg: Any) -> dict[str, Any]:
    created = await create_over_http(http, key, [translation_line(f"r{n}", f"text {n}") for n in range(LINES)])
    assert created["status"] == "in_progress", created
    batch = _batch(pg, created["id"])
    _finish_early_lines(pg, batch["run_id"], batch["tenant"])
    return {"id": created["id"], **batch}


async def _completed(http: httpx.AsyncClient, key: dict[str, str], batch_id: str) -> dict[str, Any]:
    async def completed() -> dict[str, Any] | None:
        batch: dict[str, Any] = (await http.get(f"/v1/batches/{batch_id}", headers=key)).json()
        return batch if batch["status"] == "completed" else None

    return await until(completed, f"batch {batch_id} completed")


def _output_files(pg: Any, batch_id: str) -> list[tuple[str, bool]]:
    cursor = pg.execute(
        "SELECT id, complete FROM files WHERE purpose = 'batch_output' AND filename = %s", (f"{batch_id}_output.jsonl",)
    )
    return [(str(file_id), bool(complete)) for file_id, complete in cursor.fetchall()]


async def test_the_enqueueing_server_writes_the_finished_prefix_before_the_batch_ends(
    settings: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory, pg: Any
) -> None:
    from api import create_app

    key = {"Authorization": f"Bearer {tenant_key('follow')}"}
    async with _serving(create_app(settings)) as http:
        batch = await _started_batch(http, key, pg)
        batch_id = batch["id"]
        partial = await until(lambda: _batch(pg, batch_id)["partial"], "the follower's output file begun")
        written = await until(
            lambda: lines if len(lines := _written_lines(pg, partial)) == EARLY else None, "the finished prefix written"
        )
        assert [line["custom_id"] for line in written] == [f"r{n}" for n in range(EARLY)]
        assert (await http.get(f"/v1/files/{partial}", headers=key)).status_code == 404  # not visible yet
        assert (await http.get(f"/v1/batches/{batch['id']}", headers=key)).json()["status"] == "in_progress"
        async with start_worker(DeterministicEngine()):
            done = await _completed(http, key, batch["id"])
        assert done["output_file_id"] == partial  # the same file, completed
        output = parse((await http.get(f"/v1/files/{partial}/content", headers=key)).content)
    expected = [f"early {n}" for n in range(EARLY)] + [f"text {n}" for n in range(EARLY, LINES)]
    assert [line["response"]["body"]["translation"] for line in output] == expected
    assert [line["custom_id"] for line in output] == [f"r{n}" for n in range(LINES)]
    assert _output_files(pg, batch["id"]) == [(partial, True)]
    assert _batch(pg, batch["id"])["partial"] is None


async def test_a_stopped_or_dead_follower_is_taken_over_by_the_next_read_leaving_one_file(
    settings: Settings, tenant_key: KeyMaker, start_worker: WorkerFactory, pg: Any
) -> None:
    from api import create_app

    key = {"Authorization": f"Bearer {tenant_key('takeover')}"}
    async with _serving(create_app(settings)) as http:
        batch = await _started_batch(http, key, pg)
        batch_id = batch["id"]
        first = await until(lambda: _batch(pg, batch_id)["partial"], "the follower's output file begun")
        await until(lambda: len(_written_lines(pg, first)) == EARLY, "the finished prefix written")
    stopped = _batch(pg, batch["id"])  # the server stopped: its claim given up, its file deleted
    assert stopped["status"] == "in_progress" and stopped["follow_until"].year == 1970
    assert _output_files(pg, batch["id"]) == []

    # Now as a server that died mid-write leaves it: a claim that lapsed, a file half written.
    pool = AsyncConnectionPool(settings.database_url or "", max_connections=1)
    try:
        abandoned = await PostgresFileStore(pool).begin(
            stopped["tenant"], "batch_output", f"{batch['id']}_output.jsonl"
        )
        await abandoned.append(b'{"half": "a line')
    finally:
        await pool.close()
    pg.execute(
        "UPDATE batches SET follower = 'dead', follow_until = now() - interval '1 second', "
        "partial_output_file_id = %s WHERE id = %s",
        (abandoned.id, batch["id"]),
    )
    async with _serving(create_app(settings)) as http:
        assert (await http.get(f"/v1/batches/{batch['id']}", headers=key)).json()["status"] == "in_progress"
        taken = await until(
            lambda: (row := _batch(pg, batch_id))["partial"] not in (None, abandoned.id) and row,
            "the lapsed claim taken over, with a file of its own",
        )
        assert taken["follower"] != "dead"
        async with start_worker(DeterministicEngine()):
            done = await _completed(http, key, batch["id"])
        output = parse((await http.get(f"/v1/files/{done['output_file_id']}/content", headers=key)).content)
    assert [line["custom_id"] for line in output] == [f"r{n}" for n in range(LINES)]
    assert _output_files(pg, batch["id"]) == [(done["output_file_id"], True)]  # the abandoned file is gone


async def test_a_reader_does_not_finalize_a_batch_whose_follower_holds_it(
    settings: Settings, tenant_key: KeyMaker, pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every job final but the follower not done yet: reads answer ``finalizing`` and leave the output to it."""
    from api import create_app

    release = asyncio.Event()
    write_until_final = tenancy.batch_output.OutputFollower._write_until_final

    async def held(self: Any, *args: Any) -> Any:
        await release.wait()
        return await write_until_final(self, *args)

    monkeypatch.setattr(tenancy.batch_output.OutputFollower, "_write_until_final", held)
    key = {"Authorization": f"Bearer {tenant_key('held')}"}
    async with _serving(create_app(settings)) as http:
        created = await create_over_http(http, key, [translation_line(f"r{n}", f"text {n}") for n in range(EARLY)])
        batch = _batch(pg, created["id"])
        _finish_early_lines(pg, batch["run_id"], batch["tenant"])
        read = (await http.get(f"/v1/batches/{created['id']}", headers=key)).json()
        assert read["status"] == "finalizing" and read["request_counts"]["completed"] == EARLY
        assert _batch(pg, created["id"])["status"] == "in_progress"  # not claimed by the read
        release.set()
        done = await _completed(http, key, created["id"])
        output = (await http.get(f"/v1/files/{done['output_file_id']}/content", headers=key)).content
    assert [json.loads(line)["custom_id"] for line in output.splitlines()] == [f"r{n}" for n in range(EARLY)]
    assert _output_files(pg, created["id"]) == [(done["output_file_id"], True)]
