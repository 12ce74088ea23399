"""``GET /v1/usage``: each tenant sees only its own jobs, characters and tokens, by UTC day and model."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest

from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.waiting import until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine
from worker.metrics import OTHER_TENANTS


def _jobs(texts: list[str]) -> list[dict[str, str]]:
    return [{"text": text, "source_lang": "en", "target_lang": "fr"} for text in texts]


async def _usage(http: httpx.AsyncClient, key: str, jobs: int, **params: str) -> dict[str, Any]:
    """The caller's usage once it counts ``jobs`` finished jobs (the worker commits them in writer batches)."""

    async def counted() -> dict[str, Any] | None:
        response = await http.get("/v1/usage", params=params, headers=bearer(key))
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body if body["total"]["jobs"] >= jobs else None

    return await until(counted, f"the usage counts {jobs} finished jobs")


async def test_each_tenant_sees_only_its_own_usage_by_day_and_model(
    http: httpx.AsyncClient, tenant_key: KeyMaker, start_worker: WorkerFactory, pg: Any
) -> None:
    a, b = tenant_key("usage-a"), tenant_key("usage-b")
    a_texts, b_texts = ["Good morning.", "Ünïcode counts characters, not bytes: 日本語."], ["x" * 500]
    async with start_worker(DeterministicEngine()) as worker:
        for key, texts in ((a, a_texts), (b, b_texts)):
            response = await http.post("/v1/jobs", json=_jobs(texts), headers=bearer(key))
            assert response.status_code == 202, response.text
        a_usage = await _usage(http, a, len(a_texts))
        b_usage = await _usage(http, b, len(b_texts), group_by="day,model")

        def labelled() -> set[str]:
            return {
                sample.labels["tenant"]
                for family in worker.metrics.registry.collect()
                if family.name == "dragoman_tenant_characters"
                for sample in family.samples
            }

        # The writer counts a batch in /metrics just after it commits the rows the usage is read from.
        tenant_series = await until(
            lambda: {a_usage["tenant"], b_usage["tenant"]} <= (seen := labelled()) and seen, "both tenants labelled"
        )
    today = dt.datetime.now(dt.UTC).date()
    rows = pg.execute(
        "SELECT tenant, model, sum(prompt_tokens), sum(output_tokens) FROM jobs WHERE tenant IN (%s, %s) GROUP BY 1, 2",
        (a_usage["tenant"], b_usage["tenant"]),
    ).fetchall()
    tokens = {tenant: (model, prompt, output) for tenant, model, prompt, output in rows}
    assert a_usage["tenant"].startswith("usage-a") and b_usage["tenant"].startswith("usage-b")
    model, prompt, output = tokens[a_usage["tenant"]]
    assert a_usage["start"] == str(today - dt.timedelta(days=29)) and a_usage["end"] == str(today)
    assert a_usage["group_by"] == ["day"]
    expected_a = {
        "day": str(today),
        "model": None,
        "jobs": 2,
        "succeeded": 2,
        "failed": 0,
        "cancelled": 0,
        "characters": sum(len(t) for t in a_texts),
        "succeeded_characters": sum(len(t) for t in a_texts),
        "prompt_tokens": prompt,
        "output_tokens": output,
    }
    assert a_usage["data"] == [expected_a]
    assert a_usage["total"] == {**expected_a, "day": None}
    model_b, prompt_b, output_b = tokens[b_usage["tenant"]]
    assert b_usage["group_by"] == ["day", "model"]
    assert [(d["day"], d["model"], d["jobs"], d["characters"], d["prompt_tokens"]) for d in b_usage["data"]] == [
        (str(today), model_b, 1, 500, prompt_b)
    ]
    assert prompt > 0 and output > 0 and output_b > 0
    # The worker's /metrics names both tenants (well under the default cap of 50).
    assert {a_usage["tenant"], b_usage["tenant"]} <= tenant_series and OTHER_TENANTS in tenant_series
    by_model = (await http.get("/v1/usage", params={"group_by": "model"}, headers=bearer(a))).json()
    assert [(d["day"], d["model"], d["jobs"]) for d in by_model["data"]] == [(None, model, 2)]
    # A range without jobs answers an empty list and zero totals, not an error.
    empty = (await http.get("/v1/usage", params={"start": "2020-01-01", "end": "2020-01-31"}, headers=bearer(a))).json()
    assert empty["data"] == [] and empty["total"]["jobs"] == 0


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"start": "2026-13-01"}, "invalid_date"),
        ({"end": "yesterday"}, "invalid_date"),
        ({"start": "2026-1-1"}, "invalid_date"),
        ({"start": "2026-01-01\x00"}, "invalid_value"),  # a NUL: refused at the door, as on every route
        ("start=%ED%A0%80", "invalid_date"),  # a lone surrogate, as UTF-8 bytes
        ("start=%FF", "invalid_date"),  # not UTF-8 at all
        ({"start": "2026-02-01", "end": "2026-01-31"}, "invalid_range"),
        ({"start": "2020-01-01", "end": "2026-01-01"}, "invalid_range"),
        ({"group_by": "tenant"}, "invalid_group_by"),
        ({"group_by": "day,day"}, "invalid_group_by"),
        ({"group_by": ""}, "invalid_group_by"),
    ],
)
async def test_bad_parameters_are_a_400_in_the_api_s_error_shape(
    http: httpx.AsyncClient, tenant_key: KeyMaker, params: dict[str, str] | str, code: str
) -> None:
    key = tenant_key("usage-bad")
    if isinstance(params, str):  # bytes httpx would not encode: sent as they are
        response = await http.get(f"/v1/usage?{params}", headers=bearer(key))
    else:
        response = await http.get("/v1/usage", params=params, headers=bearer(key))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"]


async def test_the_range_limit_is_a_setting(http: httpx.AsyncClient, tenant_key: KeyMaker, settings: Settings) -> None:
    key = tenant_key("usage-range")
    longest = {"start": "2026-01-01", "end": str(dt.date(2026, 1, 1) + dt.timedelta(days=settings.usage_max_days - 1))}
    assert (await http.get("/v1/usage", params=longest, headers=bearer(key))).status_code == 200
    one_more = {**longest, "end": str(dt.date.fromisoformat(longest["end"]) + dt.timedelta(days=1))}
    response = await http.get("/v1/usage", params=one_more, headers=bearer(key))
    assert response.status_code == 400 and "DRAGOMAN_USAGE_MAX_DAYS" in response.json()["error"]["message"]


async def test_usage_needs_an_api_key(http: httpx.AsyncClient) -> None:
    assert (await http.get("/v1/usage")).status_code == 401
