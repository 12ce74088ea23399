"""A run whose source is ``auto``: each line's job detects its own language, as a job sent with ``auto`` does.

Before, ``POST /v1/runs?source_lang=auto`` was refused ("unknown language code 'auto'"), though a line could say
``"source_lang": "auto"`` itself, and the web console sends ``auto`` (its default) with every file dropped on it.
"""

from __future__ import annotations

import json

import httpx
import pytest

from contract.ids import job_id_for
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_runs_and_documents import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)

LINES = {
    "es": "El gato duerme en el sofá desde esta mañana y nadie en la casa quiere despertarlo.",
    "de": "Die Katze schläft seit heute Morgen auf dem Sofa, und niemand im Haus will sie wecken.",
    "it": "Il gatto dorme sul divano da stamattina e nessuno in casa vuole svegliarlo.",
}


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


async def test_the_consoles_run_upload_with_auto_detects_each_lines_language(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory
) -> None:
    key = tenant_key("acme")
    body = "".join(json.dumps({"custom_id": lang, "text": text}) + "\n" for lang, text in LINES.items())
    # The request the web console sends for a .jsonl dropped on it with its default source, auto.
    response = await http.post(
        "/v1/runs",
        params={"source_lang": "auto", "target_lang": "fr", "name": "cats.jsonl → fr"},
        content=body.encode(),
        headers={**bearer(key), "Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 202, response.text
    run_id = response.json()["id"]

    async def finished() -> bool:
        return bool((await http.get(f"/v1/runs/{run_id}", headers=bearer(key))).json()["status"] == "completed")

    async with start_worker(DeterministicEngine()):
        await until(finished, "the run completed")
    for sequence, lang in enumerate(LINES):
        job = (await http.get(f"/v1/jobs/{job_id_for(run_id, sequence)}", headers=bearer(key))).json()
        assert (job["source_lang"], job["detected_source_lang"], job["status"]) == ("auto", lang, "succeeded"), job
    results = (await http.get(f"/v1/runs/{run_id}/results", headers=bearer(key))).text.splitlines()
    assert [json.loads(line)["translation"] for line in results] == list(LINES.values())


async def test_a_run_with_auto_still_takes_a_lines_own_source(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    key = tenant_key("acme")
    body = json.dumps({"custom_id": "a", "text": "Hello.", "source_lang": "en"}) + "\n"
    response = await http.post(
        "/v1/runs", params={"source_lang": "auto", "target_lang": "fr"}, content=body.encode(), headers=bearer(key)
    )
    assert response.status_code == 202, response.text
    job = (await http.get(f"/v1/jobs/{job_id_for(response.json()['id'], 0)}", headers=bearer(key))).json()
    assert job["source_lang"] == "en"
