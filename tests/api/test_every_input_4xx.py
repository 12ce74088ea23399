"""Input the review answered 500 to (issue 48, item 6) and its kind: each is a 4xx naming what to change.

Each class is refused at the one place its kind passes through, not route by route: a NUL or lone
surrogate in any form field (DeepL's and LibreTranslate's doors, OpenAI's file upload), a CSV field
past Python's ``csv`` field limit, a JSON number no float can hold (``1e400``, ``NaN``, ``Infinity``)
in any JSON body or float query parameter, and a date whose range arithmetic leaves years 1 to 9999.
Nothing of it is logged as a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from api import create_app
from api.json_numbers import bad_json_number
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer


def _deepl(key: str) -> dict[str, str]:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing was logged at error level or with an exception."""
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


# NUL and lone surrogates in form fields ---------------------------------------------------------------


@pytest.mark.parametrize("value", ["gl\x00ossary", "\x00"])
async def test_a_nul_in_a_deepl_form_field_is_a_400_naming_the_field(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    """The review's case: ``glossary_id`` with a NUL reached PostgreSQL as a 500; now the door refuses it."""
    fields = {"text": "Hello", "source_lang": "EN", "target_lang": "DE", "glossary_id": value}
    response = await http.post("/v2/translate", data=fields, headers=_deepl(tenant_key("nul-form")))
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid_value"
    assert "glossary_id" in body["message"] and "NUL" in body["message"]
    no_traceback(caplog)


async def test_a_nul_in_a_multipart_field_or_file_name_is_a_400_on_every_door(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture
) -> None:
    """Siblings: a multipart form's fields and its file's name, on DeepL's and LibreTranslate's uploads."""
    key = tenant_key("nul-multipart")
    deepl = await http.post(
        "/v2/document",
        data={"target_lang": "DE", "glossary_id": "a\x00"},
        files={"file": ("a.txt", b"Hello")},
        headers=_deepl(key),
    )
    assert deepl.status_code == 400, deepl.text
    assert "glossary_id" in deepl.json()["message"]
    libre = await http.post(
        "/translate_file",
        data={"source": "e\x00n", "target": "de"},
        files={"file": ("a.txt", b"Hello")},
        headers=bearer(key),
    )
    assert libre.status_code == 400, libre.text
    assert "source" in libre.json()["error"]
    boundary = "b0undary"
    raw_name = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a\x00.txt"\r\n\r\nHello\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="target_lang"\r\n\r\nDE\r\n--{boundary}--\r\n'
    ).encode()
    headers = {**_deepl(key), "Content-Type": f"multipart/form-data; boundary={boundary}"}
    named = await http.post("/v2/document", content=raw_name, headers=headers)
    assert named.status_code == 400, named.text
    assert "file name" in named.json()["message"]
    no_traceback(caplog)


async def test_a_nul_in_a_libretranslate_form_field_is_a_400(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """LibreTranslate's door reads the same kind of forms: its fields are checked at the same place."""
    response = await http.post(
        "/translate", data={"q": "Hi", "source": "en", "target": "d\x00e"}, headers=bearer(tenant_key("nul-lt"))
    )
    assert response.status_code == 400, response.text
    assert "target" in response.json()["error"]


# CSV fields past Python's field limit ------------------------------------------------------------------


async def test_a_csv_glossary_field_over_the_csv_field_limit_is_a_400(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture
) -> None:
    """Python's ``csv`` refuses a field over 128 KiB with its own error: now the line is named, as a 400."""
    entries = 'hello,"' + "x" * (200 * 1024) + '"'
    body = {"name": "big", "source_lang": "EN", "target_lang": "DE", "entries": entries, "entries_format": "csv"}
    response = await http.post("/v2/glossaries", json=body, headers=_deepl(tenant_key("csv")))
    assert response.status_code == 400, response.text
    assert "line 1" in response.json()["message"]
    no_traceback(caplog)


# Numbers no float can hold -----------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
async def test_a_json_number_no_float_holds_is_a_400_on_libretranslate(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, number: str
) -> None:
    """The review's ``"alternatives": 1e400`` (an ``OverflowError`` in ``int()``), and the literals Python's JSON
    parser takes although JSON has none."""
    body = f'{{"q": "Hello", "source": "en", "target": "de", "alternatives": {number}}}'
    headers = {**bearer(tenant_key("inf")), "Content-Type": "application/json"}
    response = await http.post("/translate", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert "alternatives" in response.json()["error"]
    no_traceback(caplog)


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/v2/translate", '{"text": ["Hi"], "target_lang": "DE", "formality": 1e999}', "formality"),
        ("/v1/jobs", '{"text": "Hi", "source_lang": "en", "target_lang": "de", "metadata": {"n": 1E+400}}', "n"),
        ("/v1/batches", '{"input_file_id": "f", "endpoint": "/v1/chat/completions", "x": [NaN]}', "x"),
    ],
)
async def test_a_json_number_no_float_holds_is_a_400_on_every_json_door(
    http: httpx.AsyncClient, tenant_key: KeyMaker, path: str, body: str, named: str
) -> None:
    """One check for every JSON body: where the number is, named in the message."""
    headers = {**bearer(tenant_key("inf-any")), "Content-Type": "application/json"}
    response = await http.post(path, content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert named in response.text


async def test_a_large_exponent_inside_a_string_is_only_text(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """The number check reads JSON, not bytes: ``"1e400"`` and ``"NaN"`` as strings are ordinary texts."""
    body = '{"text": "1e400 NaN Infinity", "source_lang": "en", "target_lang": "de"}'
    headers = {**bearer(tenant_key("inf-text")), "Content-Type": "application/json"}
    response = await http.post("/v1/jobs", content=body, headers=headers)
    assert response.status_code == 202, response.text


@pytest.fixture
async def short_wait_http(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The API with a 0.2 s ``DRAGOMAN_API_MAX_WAIT_SECONDS``: a ``?wait=`` it took would be answered at once."""
    app = create_app(settings.model_copy(update={"api_max_wait_seconds": 0.2}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
            yield client


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (b'{"a": 1e400}', ("1e400", "a")),
        (b'{"a": {"b": [1, 2, -1E+0400]}}', ("-1E+0400", "a.b[2]")),
        (b"[NaN]", ("NaN", "[0]")),
        (b"-Infinity", ("-Infinity", "the body")),
        (b'{"n": ' + b"9" * 308 + b"e1}", ("9" * 308 + "e1", "n")),
        (b'{"n": ' + b"1" * 400 + b".5}", ("1" * 400 + ".5", "n")),
        (b'{"a": "1e400 NaN Infinity", "b": 1e308, "c": 1e-400, "d": ' + b"1" * 400 + b"}", None),
        (b'{"a": 1e400', None),  # not JSON: the route's parser says so
        (b" 1e400", ("1e400", "the body")),
    ],
)
def test_the_number_scanner(body: bytes, found: tuple[str, str] | None) -> None:
    """Past a float's range, as a literal Python's parser takes, or at its edge: found and placed; a large integer
    (exact in Python), a tiny or a finite float, and text that reads like a number are not."""
    assert bad_json_number(body) == found


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "Infinity War and NaN bread (1e400 is a lot)", "source_lang": "en", "target_lang": "de"}',
        b'{"id": "01a252b4-4044-788f-b37e-0205260f67e5", "n": 1e30}',
        b'{"n": [1, 2.5, -3e-12]}',
    ],
)
def test_ordinary_bodies_are_not_parsed_for_numbers(body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner parses only a body that may hold such a number: text and ids that read like one are passed at the
    cost of one regular expression search."""

    def no_parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr("api.json_numbers.json.loads", no_parse)
    assert bad_json_number(body) is None


@pytest.mark.parametrize("wait", ["inf", "nan", "-inf", "1e400"])
async def test_a_float_query_parameter_must_be_finite(
    short_wait_http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, wait: str
) -> None:
    """``?wait=`` (a float) took ``inf`` as a number of seconds: every float parameter is finite."""
    body = {"text": "Hi", "source_lang": "en", "target_lang": "de"}
    response = await short_wait_http.post(f"/v1/jobs?wait={wait}", json=body, headers=bearer(tenant_key("wait")))
    assert response.status_code == 422, response.text
    assert "wait" in response.json()["error"]["message"]
    no_traceback(caplog)


# Dates at the ends of the calendar ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "end=0001-01-05",
        "start=0001-01-01&end=0001-01-01",
        "start=9999-12-31&end=9999-12-31",
        "start=9999-12-01",
        "start=0001-01-01",
        "end=9999-12-31",
    ],
)
async def test_usage_dates_at_the_ends_of_the_calendar_are_answered(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, query: str
) -> None:
    """The review's ``end=0001-01-05``: 29 days before it is before year 1 (an ``OverflowError``). Every such
    range is answered: a 200 for what the calendar holds, a 400 naming the dates otherwise."""
    response = await http.get(f"/v1/usage?{query}", headers=bearer(tenant_key("dates")))
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.json()["error"]["code"] in ("invalid_range", "invalid_date")
    no_traceback(caplog)


async def test_usage_from_year_one_is_the_days_the_calendar_has(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    """``end=0001-01-05`` without a start: the range starts at the calendar's first day, 5 days long."""
    response = await http.get("/v1/usage?end=0001-01-05", headers=bearer(tenant_key("year-one")))
    assert response.status_code == 200, response.text
    assert response.json()["start"] == "0001-01-01"


# Found by the fuzz run of every route (tests/api/test_fuzz_every_route.py) ---------------------------------


@pytest.mark.parametrize("document_key", ["Schlüssel", "é" * 64])
async def test_a_document_key_with_non_ascii_characters_is_a_400(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, document_key: str
) -> None:
    """``hmac.compare_digest`` refuses a str with non-ASCII characters: a ``TypeError`` answered 500."""
    body = {"document_key": document_key}
    for path in ("/v2/document/abc", "/v2/document/abc/result"):
        response = await http.post(path, json=body, headers=_deepl(tenant_key("key")))
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "invalid_document_key"
    no_traceback(caplog)
