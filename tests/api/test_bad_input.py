"""Text no store can hold (NUL, lone surrogates) is a 400 in the route's error shape, on every route family.

Before the root check (``api/input_check.py``) each of these reached PostgreSQL or an error
message it could not encode: a 500, a traceback in the log and, under uvicorn, a closed
keep-alive connection. Here each is answered 4xx in its route's shape, nothing is logged as a
traceback, nothing is stored, and the same connection answers the next request.
"""

from __future__ import annotations

import json
import logging
import socket

import httpx
import pytest
import redis

from api.input_check import bad_character, bad_json_escape
from broker.keys import RedisKeys
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer

OPENAI = "openai"
NATIVE = "native"

# (method, URL, shape): a NUL in a path segment or a query parameter of each route family.
URL_CASES = [
    ("GET", "/v1/files/file-%00abc", OPENAI),
    ("GET", "/v1/files/file-%00abc/content", OPENAI),
    ("DELETE", "/v1/files/file-%00abc", OPENAI),
    ("GET", "/v1/files?after=file-%00", OPENAI),
    ("GET", "/v1/files?purpose=bat%00ch", OPENAI),
    ("GET", "/v1/batches/batch_%00abc", OPENAI),
    ("POST", "/v1/batches/batch_%00abc/cancel", OPENAI),
    ("GET", "/v1/batches?after=batch_%00", OPENAI),
    ("GET", "/v1/jobs/%00", NATIVE),
    ("POST", "/v1/jobs/%00/cancel", NATIVE),
    ("GET", "/v1/runs/run-%00", NATIVE),
    ("GET", "/v1/runs/run-%00/results", NATIVE),
    ("GET", "/v1/documents/doc-%00", NATIVE),
    ("POST", "/v1/documents?source_lang=en&target_lang=fr&filename=a%00.txt", NATIVE),
    ("POST", "/v1/runs?source_lang=en&target_lang=fr&name=r%00", NATIVE),
    ("GET", "/v1/events?job_id=%00", NATIVE),
    ("GET", "/v1/events?run_id=%00", NATIVE),
    ("GET", "/v1/events?after=1-%00", NATIVE),
]


def assert_refused(response: httpx.Response, shape: str, status: int = 400) -> dict[str, object]:
    """The refusal: ``status``, the route family's error shape; its error object."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, dict)
    if shape == OPENAI:
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error"
    else:
        assert set(error) == {"code", "message"}
    return error


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing was logged at error level or with an exception."""
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


@pytest.mark.parametrize(("method", "url", "shape"), URL_CASES)
async def test_a_nul_in_the_url_is_400_in_the_routes_shape(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    caplog: pytest.LogCaptureFixture,
    method: str,
    url: str,
    shape: str,
) -> None:
    caplog.set_level(logging.INFO)
    response = await http.request(method, url, headers=bearer(tenant_key("a")))
    error = assert_refused(response, shape)
    assert error["code"] == "invalid_value"
    assert "NUL" in str(error["message"])
    if shape == OPENAI and "?" not in url:
        assert error["param"] in {"file_id", "batch_id"}  # the route's path parameter, named
    no_traceback(caplog)


async def test_the_param_of_a_refused_query_is_named_on_openai_routes(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    response = await http.get("/v1/files?purpose=%00", headers=bearer(tenant_key("a")))
    assert assert_refused(response, OPENAI)["param"] == "purpose"


def _body(value: str) -> bytes:
    """A JSON text as ``json.dumps`` writes it: non-ASCII (surrogates included) as ``\\u`` escapes."""
    return json.dumps(value).encode()


BATCH_BODIES = [
    {"input_file_id": "file-\x00", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
    {"input_file_id": "file-\ud800", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
    {"input_file_id": "\udc00", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
]


@pytest.mark.parametrize(
    ("metadata"),
    [{"k\x00": "v"}, {"k": "v\x00"}, {"k\ud800": "v"}, {"k": "\udfff"}],
    ids=["nul-key", "nul-value", "surrogate-key", "surrogate-value"],
)
async def test_batch_metadata_with_nul_or_a_lone_surrogate_is_400_and_nothing_is_stored(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, metadata: dict[str, str]
) -> None:
    key = bearer(tenant_key("a"))
    uploaded = await http.post(
        "/v1/files",
        files={"file": ("in.jsonl", b'{"custom_id":"a","method":"POST","url":"/v1/translations","body":{}}\n')},
        data={"purpose": "batch"},
        headers=key,
    )
    assert uploaded.status_code == 200, uploaded.text
    body = {
        "input_file_id": uploaded.json()["id"],
        "endpoint": "/v1/translations",
        "completion_window": "24h",
        "metadata": metadata,
    }
    content = json.dumps(body).encode()
    response = await http.post("/v1/batches", content=content, headers={**key, "Content-Type": "application/json"})
    assert assert_refused(response, OPENAI)["code"] == "invalid_value"
    assert (await http.get("/v1/batches", headers=key)).json()["data"] == []
    no_traceback(caplog)


@pytest.mark.parametrize("body", BATCH_BODIES, ids=["nul", "high-surrogate", "low-surrogate"])
async def test_a_bad_input_file_id_is_400(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, body: dict[str, str]
) -> None:
    key = bearer(tenant_key("a"))
    response = await http.post(
        "/v1/batches", content=json.dumps(body).encode(), headers={**key, "Content-Type": "application/json"}
    )
    assert assert_refused(response, OPENAI)["code"] == "invalid_value"
    assert (await http.get("/v1/batches", headers=key)).json()["data"] == []
    no_traceback(caplog)


@pytest.mark.parametrize(
    "text", ["a\x00b", "a\ud800b", "\udc00", "a\ud83d"], ids=["nul", "high", "low", "trailing-high"]
)
async def test_a_job_with_nul_or_a_lone_surrogate_is_refused_and_not_queued(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    caplog: pytest.LogCaptureFixture,
    raw_redis: redis.Redis,
    settings: Settings,
    text: str,
) -> None:
    body = json.dumps({"text": text, "source_lang": "en", "target_lang": "fr"}).encode()
    response = await http.post(
        "/v1/jobs", content=body, headers={**bearer(tenant_key("a")), "Content-Type": "application/json"}
    )
    assert assert_refused(response, NATIVE)["code"] == "invalid_value"
    assert raw_redis.exists(RedisKeys.from_settings(settings).jobs_stream) == 0
    no_traceback(caplog)


async def test_a_surrogate_pair_and_an_escaped_backslash_are_accepted(
    http: httpx.AsyncClient, tenant_key: KeyMaker
) -> None:
    # An emoji as json.dumps writes it (a pair of escapes), and the six letters \ud800 as text.
    body = json.dumps({"text": "smile \U0001f600 \\ud800", "source_lang": "en", "target_lang": "fr"}).encode()
    assert b"\\ud83d\\ude00" in body and b"\\\\ud800" in body
    response = await http.post(
        "/v1/jobs", content=body, headers={**bearer(tenant_key("a")), "Content-Type": "application/json"}
    )
    assert response.status_code == 202, response.text


def test_the_escape_scanner() -> None:
    assert bad_json_escape(_body("\U0001f600")) is None
    assert bad_json_escape(b'"\\\\u0000"') is None  # an escaped backslash, then text
    assert bad_json_escape(b'"\\\\\\u0000"') == "U+0000"  # an escaped backslash, then an escape
    assert bad_json_escape(_body("\ud83d")) == "U+D83D"
    assert bad_json_escape(_body("\ud83d x \ude00")) == "U+D83D"
    assert bad_json_escape(_body("\ude00\ud83d")) == "U+DE00"
    assert bad_json_escape(b'"\\uD800\\uDC00"') is None
    assert bad_character("ok") is None and bad_character("a\ud800") == "U+D800"


async def test_a_run_line_whose_custom_id_is_a_lone_surrogate_is_a_readable_422(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture
) -> None:
    # A run's JSONL is an upload, which its route validates itself: the error quotes the id escaped.
    line = json.dumps({"custom_id": "\ud800", "text": "hello", "source_lang": "en", "target_lang": "xx-bad"})
    response = await http.post("/v1/runs", content=line.encode() + b"\n", headers=bearer(tenant_key("a")))
    error = assert_refused(response, NATIVE, 422)
    assert error["code"] == "invalid_run_file"
    assert "\\ud800" in str(error["message"])
    no_traceback(caplog)


async def test_a_document_may_hold_the_text_of_an_escape(http: httpx.AsyncClient, tenant_key: KeyMaker) -> None:
    # A document is an upload, not a JSON body: "\u0000" in a Markdown text is six characters of prose.
    response = await http.post(
        "/v1/documents",
        params={"source_lang": "en", "target_lang": "fr", "format": "md"},
        content=b"JSON writes NUL as `\\u0000` and a lone surrogate as `\\ud800`.\n",
        headers=bearer(tenant_key("a")),
    )
    assert response.status_code == 202, response.text


def _raw_exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    """Send one HTTP/1.1 request on an open connection; its status and body (Content-Length framed)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        rest += chunk
    return int(head.split(b" ")[1]), rest[:length]


def test_the_keep_alive_connection_stays_usable_after_a_refusal(api_url: str, tenant_key: KeyMaker) -> None:
    key = tenant_key("a")
    host, port = api_url.removeprefix("http://").split(":")
    auth = f"Authorization: Bearer {key}\r\nHost: {host}\r\n".encode()
    job = json.dumps({"text": "a\x00", "source_lang": "en", "target_lang": "fr"}).encode()
    with socket.create_connection((host, int(port))) as sock:
        status, body = _raw_exchange(sock, b"GET /v1/files?purpose=%00 HTTP/1.1\r\n" + auth + b"\r\n")
        assert status == 400 and json.loads(body)["error"]["code"] == "invalid_value"
        status, body = _raw_exchange(
            sock,
            b"POST /v1/jobs HTTP/1.1\r\n"
            + auth
            + b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(job)}\r\n\r\n".encode()
            + job,
        )
        assert status == 400 and json.loads(body)["error"]["code"] == "invalid_value"
        status, body = _raw_exchange(sock, b"GET /v1/batches/batch_%00 HTTP/1.1\r\n" + auth + b"\r\n")
        assert status == 400
        status, body = _raw_exchange(sock, b"GET /v1/files HTTP/1.1\r\n" + auth + b"\r\n")
        assert status == 200, body


def test_a_run_lines_error_quotes_a_lone_surrogate_custom_id_escaped() -> None:
    from producer.run_files import InvalidRunFileError, parse_run_line

    line = json.dumps({"custom_id": "id\udc80", "text": "hello", "source_lang": "en", "target_lang": "xx-bad"})
    with pytest.raises(InvalidRunFileError) as raised:
        parse_run_line(1, line, None, None, 1000, "00000000-0000-0000-0000-000000000000")
    message = str(raised.value)
    assert "(id\\udc80)" in message
    message.encode("utf-8")  # the whole point: it can be written out
