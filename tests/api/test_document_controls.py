"""A document's formality, context and glossary reach every one of its segment jobs (the orchestrator's split)."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlencode

import httpx
import pytest
import redis

from broker.keys import RedisKeys
from contract.controls import MAX_CONTEXT_CHARS
from contract.schemas import JobSpec
from contract.settings import Settings
from contract.wire import decode_job_entry
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_runs_and_documents import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


def _segment_specs(raw_redis: redis.Redis, settings: Settings, tenant: str, document_id: str) -> list[JobSpec]:
    """The document's segment jobs as they wait in the bulk lane or the tenant's staging stream in front of it."""
    keys = RedisKeys.from_settings(settings)
    lane = keys.bulk_jobs_stream
    specs: list[JobSpec] = []
    for stream in (lane, keys.staging(lane, tenant)):
        entries: list[tuple[str, dict[str, str]]] = raw_redis.xrange(stream)  # type: ignore[assignment]
        specs += [decode_job_entry(fields, max_chars=settings.max_text_chars) for _, fields in entries]
    return sorted((s for s in specs if s.document_id == document_id), key=lambda s: s.sequence or 0)


async def test_every_segment_job_carries_the_documents_formality_context_and_glossary(
    http: httpx.AsyncClient,
    make_key: KeyMaker,
    raw_redis: redis.Redis,
    settings: Settings,
    start_worker: WorkerFactory,
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    key = make_key(tenant)
    query = urlencode(
        {
            "source_lang": "en",
            "target_lang": "de",
            "filename": "invoice.md",
            "formality": "formal",
            "context": "An invoice to a customer.",
            "glossary": json.dumps({"invoice": "Rechnung"}),
        }
    )
    source = b"# Your invoice\n\nPlease pay the invoice.\n\nThank you.\n"
    response = await http.post(f"/v1/documents?{query}", content=source, headers=bearer(key))
    assert response.status_code == 202, response.text
    document_id = response.json()["id"]

    async def split() -> bool:
        return len(_segment_specs(raw_redis, settings, tenant, document_id)) == 3

    await until(split, "the document split into its segments")
    specs = _segment_specs(raw_redis, settings, tenant, document_id)
    assert {s.formality.value if s.formality else None for s in specs} == {"formal"}
    assert all(s.glossary == {"invoice": "Rechnung"} for s in specs)
    assert all(s.context and s.context.startswith("An invoice to a customer.") for s in specs)
    assert specs[0].context == "An invoice to a customer."  # nothing precedes the first segment
    assert specs[2].context and "Please pay the invoice." in specs[2].context  # the text before it follows

    async def assembled() -> bool:
        view = (await http.get(f"/v1/documents/{document_id}", headers=bearer(key))).json()
        return bool(view["status"] == "completed")

    async with start_worker(DeterministicEngine()):
        await until(assembled, "the document completed")
    listed = (await http.get("/v1/documents", headers=bearer(key))).json()["data"]
    assert listed[0]["id"] == document_id and listed[0]["counts"]["succeeded"] == 3


async def test_a_long_document_context_keeps_within_the_jobs_limit(
    http: httpx.AsyncClient, make_key: KeyMaker, raw_redis: redis.Redis, settings: Settings
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    key = make_key(tenant)
    context = "c" * (MAX_CONTEXT_CHARS - 10)
    query = urlencode({"source_lang": "en", "target_lang": "fr", "format": "txt", "context": context})
    response = await http.post(f"/v1/documents?{query}", content=b"One.\n\nTwo.\n", headers=bearer(key))
    assert response.status_code == 202, response.text
    document_id = response.json()["id"]

    async def split() -> bool:
        return len(_segment_specs(raw_redis, settings, tenant, document_id)) == 2

    await until(split, "the document split into its segments")
    specs = _segment_specs(raw_redis, settings, tenant, document_id)
    assert all(s.context and s.context.startswith(context) and len(s.context) <= MAX_CONTEXT_CHARS for s in specs)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"glossary": "not json"}, "invalid_glossary"),
        ({"glossary": "[1, 2]"}, "invalid_glossary"),
        ({"glossary": json.dumps({"a": 1})}, "invalid_glossary"),
        ({"context": "c" * (MAX_CONTEXT_CHARS + 1)}, "invalid_request"),
        ({"formality": "rude"}, "invalid_request"),
    ],
)
async def test_bad_document_controls_are_refused_before_anything_is_stored(
    http: httpx.AsyncClient, tenant_key: KeyMaker, params: dict[str, str], code: str
) -> None:
    key = tenant_key("acme")
    query = urlencode({"source_lang": "en", "target_lang": "fr", "format": "txt", **params})
    response = await http.post(f"/v1/documents?{query}", content=b"Hello.\n", headers=bearer(key))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert (await http.get("/v1/documents", headers=bearer(key))).json()["data"] == []
