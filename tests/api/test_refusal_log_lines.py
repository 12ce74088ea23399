"""Refused input is logged as one line saying what and why, never a traceback (issue 48).

A 4xx refusal is one ``INFO`` line (method, path, status, code and the message the client got); a client
that goes away in the middle of its upload is one line too, where it wrote two tracebacks (about 7 KB)
before. The log is read as the operator sees it: records of every logger, uvicorn's included.
"""

from __future__ import annotations

import logging
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.conftest import KeyMaker, bearer
from tests.waiting import wait_for


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record that carries a traceback, as an exception or as text."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.exc_info or "Traceback (most recent call last)" in record.getMessage()
    ]


def refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The API's refusal lines."""
    return [record for record in caplog.records if record.name == "api.errors" and " refused " in record.getMessage()]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "expected"),
    [
        ("GET", "/v1/usage?end=tomorrow", {}, "GET /v1/usage refused 400 invalid_date: end must be a date"),
        ("POST", "/v1/jobs", {"json": [1]}, "POST /v1/jobs refused 422 invalid_request: item 0"),
        ("POST", "/v2/translate", {"data": {"text": "a\nb"}}, "POST /v2/translate refused 400 missing_parameter"),
        ("GET", "/v1/jobs/%00", {}, "GET /v1/jobs/%00 refused 400 invalid_value: job_id holds a NUL"),
    ],
)
async def test_a_refusal_is_one_info_line_with_what_and_why(
    http: httpx.AsyncClient,
    tenant_key: KeyMaker,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    kwargs: dict[str, object],
    expected: str,
) -> None:
    caplog.set_level(logging.INFO)
    response = await http.request(method, path, headers=bearer(tenant_key("refusal-line")), **kwargs)  # type: ignore[arg-type]
    assert 400 <= response.status_code < 500, response.text
    lines = refusals(caplog)
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert lines[0].levelno == logging.INFO
    assert lines[0].getMessage().startswith(expected), lines[0].getMessage()
    assert "\n" not in lines[0].getMessage()
    assert tracebacks(caplog) == []


async def test_a_refusal_line_is_bounded_and_one_line(
    http: httpx.AsyncClient, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture
) -> None:
    """A message quoting what the client sent (a long, multi-line language code) is cut and kept on one line."""
    caplog.set_level(logging.INFO)
    target = "x\n" * 5_000
    response = await http.post(
        "/translate", data={"q": "hi", "source": "en", "target": target}, headers=bearer(tenant_key("long-line"))
    )
    assert response.status_code == 400, response.text
    (line,) = refusals(caplog)
    assert "\n" not in line.getMessage() and len(line.getMessage()) < 1_000


@pytest.mark.parametrize(
    ("target", "content_type", "piece"),
    [
        ("/v1/runs?source_lang=en&target_lang=fr", "application/x-ndjson", b'{"text": "hello", "custom_id": "x"}\n'),
        ("/v1/jobs", "application/json", b'[{"text": "hello", "source_lang": "en", "target_lang": "fr"},'),
        ("/v2/translate", "application/x-www-form-urlencoded", b"text=hello&"),
    ],
)
def test_an_abandoned_upload_is_one_line_not_two_tracebacks(
    api_url: str, tenant_key: KeyMaker, caplog: pytest.LogCaptureFixture, target: str, content_type: str, piece: bytes
) -> None:
    """The client sends part of its body (a run's JSONL, a JSON list of jobs, a DeepL form) and closes the
    connection: one line says so, and nothing else is logged about it."""
    caplog.set_level(logging.INFO)
    key = tenant_key("abandon")
    address = urlsplit(api_url)
    path = target.partition("?")[0]
    head = (
        f"POST {target} HTTP/1.1\r\n"
        f"Host: {address.netloc}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(piece) * 1000}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname or "", address.port or 80)) as sock:
        sock.sendall(head + piece * 10)
    wait_for(
        lambda: any(path in record.getMessage() for record in caplog.records),
        "the API logs the abandoned upload",
        every=0.02,
    )
    about = [record for record in caplog.records if path in record.getMessage()]
    assert len(about) == 1, [r.getMessage() for r in caplog.records]
    assert about[0].levelno == logging.INFO
    assert about[0].getMessage().startswith(f"POST {path}: the client went away"), about[0].getMessage()
    assert tracebacks(caplog) == []
