"""Quality flags over HTTP: a run's counts, its results' quality_flags and ``?flagged=`` (400 for a bad value);
a batch's request_counts and its output lines."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from openai.types import Batch

from contract.settings import Settings
from storage import RowRecord
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_openai_batches import create_over_http, translation_line
from tests.flagged_rows import flagged_row, write_rows
from tests.waiting import until

pytestmark = pytest.mark.timeout(120)

FLAGS: list[dict[str, str]] = [
    {},
    {"numbers": "source number 42 missing"},
    {"wrong_language": "output is en, not fr", "numbers": "source number 7 missing"},
    {},
]


def _row(run_id: str, n: int, flags: dict[str, str] | None, *, custom_id: str) -> RowRecord:
    """Line ``n`` of the run, succeeded with ``flags``, as the worker's upsert writes it."""
    return flagged_row(run_id, n, flags, run_id=run_id, metadata={"custom_id": custom_id}, tenant="acme")


async def _write(settings: Settings, records: list[RowRecord]) -> None:
    await write_rows(settings.database_url, records)


async def _finished_run(http: httpx.AsyncClient, key: str, settings: Settings) -> str:
    """A run of four lines over HTTP whose jobs the worker's upsert finished with :data:`FLAGS`."""
    body = b"".join(json.dumps({"custom_id": f"c{n}", "text": f"Line {n}."}).encode() + b"\n" for n in range(4))
    response = await http.post(
        "/v1/runs?source_lang=en&target_lang=fr",
        content=body,
        headers={**bearer(key), "Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 202, response.text
    run_id = str(response.json()["id"])
    await _write(settings, [_row(run_id, n, flags, custom_id=f"c{n}") for n, flags in enumerate(FLAGS)])
    return run_id


async def test_a_runs_counts_and_results_show_its_flags(
    http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings
) -> None:
    key = tenant_key("acme")
    run_id = await _finished_run(http, key, settings)
    run = (await http.get(f"/v1/runs/{run_id}", headers=bearer(key))).json()
    assert run["counts"]["succeeded"] == 4 and run["counts"]["flagged"] == 2
    assert run["counts"]["flags"] == {"numbers": 2, "wrong_language": 1}

    every = (await http.get(f"/v1/runs/{run_id}/results", headers=bearer(key))).text.splitlines()
    assert [json.loads(line)["quality_flags"] for line in every] == FLAGS

    for query, expected in (
        ("flagged=true", ["c1", "c2"]),
        ("flagged=wrong_language", ["c2"]),
        ("flagged=tags,numbers", ["c1", "c2"]),
        ("flagged=false", ["c0", "c1", "c2", "c3"]),
    ):
        response = await http.get(f"/v1/runs/{run_id}/results?{query}", headers=bearer(key))
        assert response.status_code == 200, response.text
        assert [json.loads(line)["custom_id"] for line in response.text.splitlines()] == expected, query


@pytest.mark.parametrize("value", ["maybe", "numbers,bogus"])
async def test_a_bad_flagged_value_is_400_naming_the_flags(
    http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings, value: str
) -> None:
    key = tenant_key("acme")
    run_id = await _finished_run(http, key, settings)
    response = await http.get(f"/v1/runs/{run_id}/results?flagged={value}", headers=bearer(key))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_flagged" and "wrong_language" in error["message"]


async def test_a_batch_counts_its_flags_and_its_output_lines_carry_them(
    http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings, pg: Any
) -> None:
    key = bearer(tenant_key("acme"))
    lines = [translation_line(f"req-{n}", f"Hello number {n}") for n in range(4)]
    batch = await create_over_http(http, key, lines)
    assert batch["status"] == "in_progress", batch
    (run_id,) = pg.execute("SELECT run_id::text FROM batches WHERE id = %s", (batch["id"],)).fetchone()
    await _write(settings, [_row(run_id, n, flags, custom_id=f"req-{n}") for n, flags in enumerate(FLAGS[:3])])

    running = (await http.get(f"/v1/batches/{batch['id']}", headers=key)).json()
    assert running["status"] == "in_progress" and running["request_counts"]["completed"] == 3
    assert running["request_counts"]["flagged"] == 2
    assert running["request_counts"]["flags"] == {"numbers": 2, "wrong_language": 1}
    sdk_view = Batch.model_validate(running)  # the openai SDK's model keeps the extension
    assert sdk_view.request_counts is not None and sdk_view.request_counts.flagged == 2  # type: ignore[attr-defined]

    await _write(settings, [_row(run_id, 3, FLAGS[3], custom_id="req-3")])

    async def completed() -> dict[str, Any] | None:
        batch_now: dict[str, Any] = (await http.get(f"/v1/batches/{batch['id']}", headers=key)).json()
        return batch_now if batch_now["status"] == "completed" else None

    done = await until(completed, "the batch completed")
    assert done["request_counts"]["flagged"] == 2, done
    listed = (await http.get("/v1/batches", headers=key)).json()["data"]
    assert [b["request_counts"]["flagged"] for b in listed if b["id"] == batch["id"]] == [None]  # not counted
    output = await http.get(f"/v1/files/{done['output_file_id']}/content", headers=key)
    bodies = [json.loads(line)["response"]["body"] for line in output.text.splitlines()]
    assert [body["quality_flags"] for body in bodies] == FLAGS
