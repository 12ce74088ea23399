"""JSON bodies of hostile depth and width on every door (issue 48, item 6): a 4xx in the door's shape, the loop free.

Before: a body nested 100,000 deep, sent without a key, was a ``RecursionError`` 500 with ~8 KB of
traceback on ``/v2/translate``, ``/v2/glossaries``, ``/translate`` and ``/detect``; FastAPI's own
routes answered it ``400 There was an error parsing the body`` after recursing. A list of three
million ``{}`` sent to ``POST /v1/jobs`` was validated on the event loop (pydantic's errors for it
take most of a minute) and a body's ``json.loads`` ran there too. Now the depth is refused before
any parser runs (``400 json_too_deep``), a large body is parsed and validated on the API's work
threads, a list longer than a request may carry is refused before its items are validated, and
the loop's longest stall stays under :data:`~tests.api.loop_lag.STALL_BOUND_S` throughout.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from api.json_body import SMALL_BODY_BYTES, JsonBodyRoute
from contract.json_shape import MAX_JSON_DEPTH
from producer.run_files import InvalidRunFileError, parse_run_line
from tenancy.batch_lines import BadLineError, parse_line
from tests.api.conftest import KeyMaker, bearer
from tests.api.loop_lag import STALL_BOUND_S, LoopLag

pytestmark = pytest.mark.timeout(300)

DEEPL = "deepl"
LIBRETRANSLATE = "libretranslate"
NATIVE = "native"
OPENAI = "openai"

DOORS = [
    ("/v2/translate", DEEPL),
    ("/v2/glossaries", DEEPL),
    ("/translate", LIBRETRANSLATE),
    ("/detect", LIBRETRANSLATE),
    ("/v1/jobs", NATIVE),
    ("/v1/batches", OPENAI),
]


def nested(depth: int) -> bytes:
    """A JSON object whose ``text`` is a list nested ``depth`` deep."""
    return b'{"text": ' + b"[" * depth + b"]" * depth + b', "target_lang": "DE"}'


def error_code(response: httpx.Response, shape: str) -> str:
    """The answer's error code, read from the door's own error shape (checked to be that shape)."""
    body = response.json()
    if shape == DEEPL:
        assert set(body) == {"message", "code"}, body
        code = body["code"]
    elif shape == LIBRETRANSLATE:
        assert set(body) == {"error", "code"} and isinstance(body["error"], str), body
        code = body["code"]
    else:
        error = body["error"]
        expected = {"message", "type", "param", "code"} if shape == OPENAI else {"code", "message"}
        assert set(error) == expected, body
        code = error["code"]
    assert isinstance(code, str)
    return code


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing logged as an error, nothing with a traceback."""
    bad = [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]
    assert not bad, [record.getMessage() for record in bad]


def json_post(content: bytes, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``post`` keywords sending ``content`` as a JSON body (encoded by the test, not the server)."""
    return {"content": content, "headers": {"Content-Type": "application/json", **(headers or {})}}


@pytest.mark.parametrize("depth", [1_500, 100_000], ids=["small-body", "100k-deep"])
@pytest.mark.parametrize(("url", "shape"), DOORS)
async def test_a_body_nested_deeper_than_the_limit_is_400_with_no_key(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, url: str, shape: str, depth: int
) -> None:
    """No key at all: ``400 json_too_deep`` in the door's shape, no traceback, the loop never stalled.

    1,500 levels fit in under 4 KiB (parsed on the loop), 100,000 do not (on a thread): both were past
    Python's recursion limit, and a 500 (or FastAPI's bare 400) before.
    """
    caplog.set_level(logging.INFO)
    body = nested(depth)
    assert (len(body) <= SMALL_BODY_BYTES) == (depth == 1_500)
    async with LoopLag() as lag:
        answer = await http.post(url, **json_post(body))
    assert answer.status_code == 400, answer.text[:500]
    assert error_code(answer, shape) == "json_too_deep"
    assert f"{depth + 1:,} levels" in answer.text  # the object around the list is one level more
    assert str(MAX_JSON_DEPTH) in answer.text
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"
    no_traceback(caplog)


@pytest.mark.parametrize(
    ("url", "headers", "shape"),
    [
        ("/v2/translate", "deepl", DEEPL),
        ("/translate", "bearer", LIBRETRANSLATE),
        ("/v1/jobs", "bearer", NATIVE),
    ],
)
async def test_a_deep_body_with_a_valid_key_is_400_too(
    http: httpx.AsyncClient, tenant_key: KeyMaker, url: str, headers: str, shape: str
) -> None:
    """The key is fine, the body is not: the same refusal, after the key was checked."""
    key = tenant_key("deep")
    sent = {"Authorization": f"DeepL-Auth-Key {key}"} if headers == "deepl" else bearer(key)
    answer = await http.post(url, **json_post(nested(100_000), sent))
    assert answer.status_code == 400, answer.text[:500]
    assert error_code(answer, shape) == "json_too_deep"


async def test_the_depth_limit_itself_is_read(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """A job whose ``metadata`` nests to the limit is parsed, and judged on its content (the job's own rule)."""
    inner: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH - 2):  # the job object and metadata itself are two levels
        inner = {"k": inner}
    job = {"text": "Hello", "source_lang": "en", "target_lang": "de", "metadata": {"k": inner}}
    answer = await http.post("/v1/jobs", json=job, headers=bearer(tenant_key("limit")))
    assert answer.status_code == 422, answer.text[:500]
    assert error_code(answer, NATIVE) == "invalid_metadata"  # parsed: the job's metadata rule answers


def jobs_with_unknown_fields(count: int, unknown: int) -> bytes:
    """``count`` jobs (a list; one: the object), each with ``unknown`` fields no job has."""
    job = {"text": "a", "source_lang": "en", "target_lang": "de", **{f"k{n}": 1 for n in range(unknown)}}
    return json.dumps([job] * count if count > 1 else job).encode()


@pytest.mark.parametrize(
    ("url", "shape", "body"),
    [
        ("/v1/jobs", NATIVE, b"[" + b"{}," * 3_000_000 + b"{}]"),
        ("/v1/jobs", NATIVE, jobs_with_unknown_fields(1, 600_000)),
        (
            "/v1/jobs",
            NATIVE,
            b'{"text": "a", "source_lang": "en", "target_lang": "de", "pad": [' + b"1," * 4_000_000 + b"1]}",
        ),
        ("/v2/translate", DEEPL, json.dumps({"target_lang": "DE", "text": ["a"] * 2_000_000}).encode()),
        ("/translate", LIBRETRANSLATE, json.dumps({"source": "en", "target": "de", "q": ["a"] * 2_000_000}).encode()),
        ("/detect", LIBRETRANSLATE, json.dumps({"q": "a", "pad": list(range(1_000_000))}).encode()),
    ],
    ids=["3M-empty-jobs", "600k-unknown-fields", "4M-numbers", "deepl-2M-texts", "libretranslate-2M-q", "detect-1M"],
)
async def test_a_body_of_more_values_than_a_request_may_hold_is_refused_unparsed(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    caplog: pytest.LogCaptureFixture,
    url: str,
    shape: str,
    body: bytes,
) -> None:
    """8-10 MB bodies of millions of small values: ``413 too_many_json_values``, the loop never waiting on them.

    Before, ``POST /v1/jobs`` validated the first on the loop (three million items' errors: most of a
    minute) and every door parsed its body there (a parse is one call that keeps the interpreter lock).
    """
    caplog.set_level(logging.INFO)
    key = tenant_key("wide")
    headers = {"Authorization": f"DeepL-Auth-Key {key}"} if shape == DEEPL else bearer(key)
    async with LoopLag() as lag:
        answer = await http.post(url, **json_post(body, headers))
    assert answer.status_code == 413, answer.text[:500]
    assert error_code(answer, shape) == "too_many_json_values"
    assert "at most 500,000" in answer.text
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"
    no_traceback(caplog)


def jobs_with_bad_glossaries(count: int, terms: int) -> bytes:
    """``count`` jobs whose glossaries' ``terms`` target terms are numbers, not strings."""
    job = {"text": "a", "source_lang": "en", "target_lang": "de", "glossary": {f"t{n}": n for n in range(terms)}}
    return json.dumps([job] * count).encode()


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (b"[" + b"{}," * 240_000 + b"{}]", "too_many_jobs", "240,001 items in one request, over the limit of 1,000"),
        (jobs_with_unknown_fields(1_000, 200), "invalid_request", "203 fields, and a job has at most"),
        (jobs_with_unknown_fields(1, 100_000), "invalid_request", "100,003 fields, and a job has at most"),
        (jobs_with_bad_glossaries(1_000, 200), "invalid_request", "target terms must be strings"),
    ],
    ids=["240k-empty-jobs", "1000-jobs-200-unknown-fields", "100k-unknown-fields", "1000-glossaries-of-numbers"],
)
async def test_a_body_within_the_values_limit_is_validated_off_the_loop_at_a_bounded_cost(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, body: bytes, code: str, says: str
) -> None:
    """Just under the values limit, what validation is slowest at: 422 saying why, the loop never waiting.

    The list is refused before its items are validated; a job of many unknown fields, or a glossary of
    many terms that are not strings, is one error each, not hundreds of thousands.
    """
    caplog.set_level(logging.INFO)
    async with LoopLag() as lag:
        answer = await http.post("/v1/jobs", **json_post(body, bearer(tenant_key("validated"))))
    assert answer.status_code == 422, answer.text[:500]
    assert error_code(answer, NATIVE) == code
    assert says in answer.json()["error"]["message"]
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"
    no_traceback(caplog)


async def test_a_large_valid_list_of_jobs_is_validated_off_the_loop_and_queued(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    """1,000 jobs of 9,000 characters (9 MB), some with lane's old name: all queued, as validated on the thread."""
    jobs = [
        {"text": f"{n} " + "x" * 9_000, "source_lang": "en", "target_lang": "de", "priority": "bulk" if n % 2 else None}
        for n in range(1_000)
    ]
    body = json.dumps(jobs).encode()
    assert len(body) > 9_000_000
    key = bearer(tenant_key("valid"))
    async with LoopLag() as lag:
        answer = await http.post("/v1/jobs", **json_post(body, key))
    assert answer.status_code == 202, answer.text[:500]
    ids = answer.json()["ids"]
    assert len(ids) == 1_000
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"
    looked_up = (await http.get(f"/v1/jobs/{ids[1]}", headers=key)).json()
    assert (looked_up["status"], looked_up["target_lang"]) == ("queued", "de")


async def test_a_large_invalid_list_names_its_items_as_a_small_one_does(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    """Validated on a thread, a large body's errors read as FastAPI's do for a small one: the item and the field."""
    key = bearer(tenant_key("named"))
    jobs: list[dict[str, Any]] = [{"text": "x" * 100, "source_lang": "en", "target_lang": "de"} for _ in range(100)]
    jobs[7] = {"source_lang": "en", "target_lang": "de"}
    small = await http.post("/v1/jobs", json=jobs[:10], headers=key)
    large = await http.post("/v1/jobs", json=jobs, headers=key)
    assert len(json.dumps(jobs)) > SMALL_BODY_BYTES
    assert small.status_code == large.status_code == 422
    assert small.json() == large.json()
    assert "item 7: text: Field required" in large.json()["error"]["message"]


@pytest.mark.parametrize(
    ("url", "shape", "body", "status"),
    [
        ("/v2/translate", DEEPL, {"target_lang": "DE", "text": ["a"] * 400_000}, 413),
        ("/translate", LIBRETRANSLATE, {"source": "en", "target": "de", "q": ["a"] * 400_000}, 400),
        ("/detect", LIBRETRANSLATE, {"q": "Good morning, how are you?", "pad": list(range(400_000))}, 200),
    ],
)
async def test_the_doors_parse_a_wide_body_off_the_loop(
    http: httpx.AsyncClient, tenant_key: KeyMaker, url: str, shape: str, body: dict[str, Any], status: int
) -> None:
    """Bodies of 400,000 values with a valid key: parsed on the work threads, answered as the door answers them."""
    key = tenant_key("wide-door")
    headers = {"Authorization": f"DeepL-Auth-Key {key}"} if shape == DEEPL else bearer(key)
    content = json.dumps(body).encode()
    async with LoopLag() as lag:
        answer = await http.post(url, **json_post(content, headers))
    assert answer.status_code == status, answer.text[:500]
    assert lag.longest < STALL_BOUND_S, f"the event loop stalled {lag.longest:.2f} s"


async def test_a_large_body_with_a_nul_escape_is_still_400(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """The NUL check of a large body runs on a thread now: still ``400 invalid_value``, nothing queued."""
    jobs = [{"text": "x" * 1_000, "source_lang": "en", "target_lang": "de"} for _ in range(50)]
    jobs[42]["text"] = "bad \x00 text"
    content = json.dumps(jobs).encode()
    assert len(content) > SMALL_BODY_BYTES
    answer = await http.post("/v1/jobs", **json_post(content, bearer(tenant_key("nul"))))
    assert answer.status_code == 400, answer.text[:500]
    assert error_code(answer, NATIVE) == "invalid_value"


async def test_a_document_glossary_nested_deep_in_the_query_is_422(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    """``glossary=`` is JSON in the query: 5,000 levels were a RecursionError (500), now ``422 invalid_glossary``."""
    glossary = "[" * 5_000 + "]" * 5_000
    answer = await http.post(
        "/v1/documents",
        params={"source_lang": "en", "target_lang": "de", "filename": "a.txt", "glossary": glossary},
        content=b"Hello.",
        headers=bearer(tenant_key("doc")),
    )
    assert answer.status_code == 422, answer.text[:500]
    assert error_code(answer, NATIVE) == "invalid_glossary"
    assert "5,000 levels" in answer.text


def test_a_run_line_nested_deep_is_refused_with_its_number() -> None:
    """A run's JSONL line of 100,000 ``[`` was a RecursionError; now the run's bad-line error, naming the line."""
    with pytest.raises(InvalidRunFileError, match=r"line 3: the JSON nests 100,000 levels"):
        parse_run_line(3, "[" * 100_000 + "]" * 100_000, "en", "de", 1_000, "run-1")


def test_a_batch_line_nested_deep_is_refused() -> None:
    """A batch input line of 100,000 ``[`` was a RecursionError in msgspec and json alike; now a bad line."""
    with pytest.raises(BadLineError, match=r"100,000 levels"):
        parse_line(b"[" * 100_000 + b"]" * 100_000, "/v1/translations", max_chars=100)


def test_every_route_with_a_json_body_reads_it_through_the_checked_request(app: FastAPI) -> None:
    """A route FastAPI would parse JSON for is a :class:`JsonBodyRoute` (a new router must say so too)."""
    json_routes = [
        route
        for route in app.routes
        if isinstance(route, APIRoute)
        and route.body_field is not None
        and type(route.body_field.field_info).__name__ not in ("Form", "File")
    ]
    assert {route.path for route in json_routes} >= {"/v1/jobs", "/v1/batches"}
    assert all(isinstance(route, JsonBodyRoute) for route in json_routes), [
        route.path for route in json_routes if not isinstance(route, JsonBodyRoute)
    ]


@pytest.mark.parametrize(
    ("url", "shape"), [("/v1/jobs", NATIVE), ("/v2/translate", DEEPL), ("/translate", LIBRETRANSLATE)]
)
async def test_a_large_body_with_a_number_no_float_holds_is_refused_by_its_parse(
    http: httpx.AsyncClient, tenant_key: KeyMaker, url: str, shape: str
) -> None:
    """Over 4 KiB the number is not searched for on the loop's thread: the one parse, off the loop, refuses it."""
    pad = "x" * 8_000
    bodies = {
        NATIVE: {"text": pad, "source_lang": "en", "target_lang": "de", "metadata": {"score": 1}},
        DEEPL: {"target_lang": "DE", "text": [pad], "score": 1},
        LIBRETRANSLATE: {"source": "en", "target": "de", "q": pad, "api_key": "", "alternatives": 1},
    }
    body = json.dumps(bodies[shape]).replace(": 1}", ": 1e400}").encode()
    assert b"1e400" in body and len(body) > 4096
    key = tenant_key("numbers")
    headers = {"Authorization": f"DeepL-Auth-Key {key}"} if shape == DEEPL else bearer(key)
    answer = await http.post(url, **json_post(body, headers))
    assert 400 <= answer.status_code < 500, answer.text
    assert "1e400" in answer.text
