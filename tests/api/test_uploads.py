"""Issue 33 over HTTP: slow uploads hold no file-store connection and time out (408, nothing stored), long
JSONL lines, the per-tenant file quota, expiry, non-Latin-1 names, files in use, bad ids.

The app runs under uvicorn in a thread (real sockets: a trickling client is a raw socket); the
official ``openai`` SDK drives the OpenAI routes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import openai
import psycopg
import pytest
from fastapi import FastAPI

from api import create_app
from api.routes.files import content_disposition
from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer, uvicorn_serving
from tests.api.test_openai_batches import call, jsonl, sdk, translation_line
from tests.waiting import until

MiB = 1024 * 1024


def served(settings: Settings) -> AbstractContextManager[str]:
    """``settings``' API under uvicorn in a thread; its base URL."""
    return uvicorn_serving(create_app(settings))


@pytest.fixture
def slow_url(settings: Settings) -> Iterator[str]:
    """An API whose body deadlines are short: 2 s between reads, 8 s in all."""
    with served(
        settings.model_copy(update={"upload_read_timeout_seconds": 2.0, "upload_total_timeout_seconds": 8.0})
    ) as url:
        yield url


@pytest.fixture
def stalling_url(settings: Settings) -> Iterator[str]:
    """An API that gives up on a body after 0.25 s without a read (a stalled body waits for nothing else)."""
    with served(settings.model_copy(update={"upload_read_timeout_seconds": 0.25})) as url:
        yield url


def _run_line(n: int) -> bytes:
    return json.dumps({"custom_id": f"c{n}", "text": f"line {n}", "source_lang": "en", "target_lang": "fr"}).encode()


async def trickle(url: str, key: str, path: str, every: float, lines: int) -> tuple[int, bytes]:
    """POST ``path`` from a raw socket, one JSONL line every ``every`` seconds (``lines`` of them, the declared
    length), until the server answers; its status and body (0 if it closed the connection without an answer)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    body = [_run_line(n) + b"\n" for n in range(lines)]
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/x-ndjson\r\nContent-Length: {sum(map(len, body))}\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    answer = asyncio.create_task(reader.read(65536))
    try:
        for line in body:
            done, _ = await asyncio.wait({answer}, timeout=every)
            if done:
                break
            writer.write(line)
            await writer.drain()
        raw = await answer
    except ConnectionError:
        return 0, b""
    finally:
        answer.cancel()
        writer.close()
    status = int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/") else 0
    return status, raw.partition(b"\r\n\r\n")[2]


async def test_trickling_run_uploads_hold_no_connection_and_time_out_with_nothing_stored(
    slow_url: str, tenant_key: KeyMaker
) -> None:
    slow_key, other_key = tenant_key("slow"), tenant_key("other")
    # Ten tricklers, one line each half second: more than the file store's 8 connections.
    tricklers = [
        asyncio.create_task(trickle(slow_url, slow_key, "/v1/runs?target_lang=fr", 0.5, 100)) for _ in range(10)
    ]
    await asyncio.sleep(1.5)
    other = sdk(slow_url, other_key)
    uploaded = await call(other.files.create, file=("in.jsonl", jsonl([translation_line("a", "b")])), purpose="batch")
    content = await call(other.files.content, uploaded.id)
    assert content.read() == jsonl([translation_line("a", "b")])
    assert not any(t.done() for t in tricklers)  # all ten were still sending meanwhile
    answers = await asyncio.gather(*tricklers)
    assert [status for status, _ in answers] == [408] * 10  # past the 8 s total deadline
    assert json.loads(answers[0][1])["error"]["code"] == "request_timeout"
    async with httpx.AsyncClient(base_url=slow_url, headers=bearer(slow_key)) as http:
        assert (await http.get("/v1/files")).json()["data"] == []  # no run upload was stored


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/v1/runs?target_lang=fr", "application/x-ndjson"),
        ("/v1/files", "multipart/form-data; boundary=XyZ"),
        ("/v1/documents?source_lang=en&target_lang=fr&format=txt", "text/plain"),
        ("/v1/jobs", "application/json"),
    ],
)
async def test_a_body_that_stops_arriving_is_408(
    stalling_url: str, tenant_key: KeyMaker, path: str, content_type: str
) -> None:
    parts = urlsplit(stalling_url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {tenant_key('stall')}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: 5000\r\n\r\n--XyZ\r\n".encode()
    )
    await writer.drain()
    try:
        raw = await reader.read(65536)
    finally:
        writer.close()
    assert raw.startswith(b"HTTP/1.1 408"), raw[:200]
    assert b"DRAGOMAN_UPLOAD_READ_TIMEOUT_SECONDS" in raw


async def test_a_20_mib_single_line_is_refused_naming_it_and_nothing_is_stored(
    settings: Settings, tenant_key: KeyMaker
) -> None:
    key = tenant_key("long")
    big = b'{"custom_id": "x", "text": "' + b"a" * (20 * MiB) + b'"}\n'
    with served(settings.model_copy(update={"max_file_bytes": 32 * MiB})) as url:
        client = sdk(url, key)
        with pytest.raises(openai.BadRequestError) as raised:
            await call(client.files.create, file=("in.jsonl", b"{}\n" + big), purpose="batch")
        assert raised.value.code == "line_too_long" and "line 2 is longer than 1,048,576" in raised.value.message
        async with httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=None) as http:
            refused = await http.post("/v1/runs?target_lang=fr", content=_run_line(0) + b"\n" + big)
            assert refused.status_code == 422 and "line 2 is longer" in refused.json()["error"]["message"]
            assert (await http.get("/v1/files")).json()["data"] == []


async def test_the_file_quota_refuses_an_upload_before_storing_it_and_holds_under_concurrency(
    settings: Settings, tenant_key: KeyMaker
) -> None:
    one = jsonl([translation_line("a", "b")])
    key, other_key = tenant_key("quota"), tenant_key("roomy")
    with served(settings.model_copy(update={"file_quota_bytes": 3 * len(one)})) as url:
        client = sdk(url, key)
        results = await asyncio.gather(
            *(call(client.files.create, file=(f"f{n}.jsonl", one), purpose="batch") for n in range(10)),
            return_exceptions=True,
        )
        kept = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(kept) == 3 and len(refused) == 7
        assert all(isinstance(r, openai.APIStatusError) and r.status_code == 413 for r in refused)
        assert refused[0].code == "file_quota_exceeded"  # type: ignore[attr-defined]
        assert len((await call(client.files.list)).data) == 3
        async with httpx.AsyncClient(base_url=url, headers=bearer(key)) as http:
            run = await http.post("/v1/runs?target_lang=fr", content=_run_line(0) + b"\n")
            assert run.status_code == 413 and run.json()["error"]["code"] == "file_quota_exceeded"
        await call(client.files.delete, kept[0].id)  # room again
        await call(client.files.create, file=("again.jsonl", one), purpose="batch")
        await call(sdk(url, other_key).files.create, file=("theirs.jsonl", one), purpose="batch")


async def test_expires_after_through_the_sdk_then_404_and_swept(settings: Settings, tenant_key: KeyMaker) -> None:
    with served(settings.model_copy(update={"sweep_interval_seconds": 0.2})) as url:
        await _expiry_round_trip(url, settings, tenant_key("expiry"))


async def _chunks_of(database_url: str, file_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT count(*) FROM file_chunks WHERE file_id = %s", (file_id,))
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _expiry_round_trip(url: str, settings: Settings, key: str) -> None:
    client = sdk(url, key)
    data = jsonl([translation_line("a", "b")])
    uploaded = await call(
        client.files.create,
        file=("in.jsonl", data),
        purpose="batch",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert uploaded.expires_at == uploaded.created_at + 3600
    defaulted = await call(client.files.create, file=("d.jsonl", data), purpose="batch")
    assert defaulted.expires_at == defaulted.created_at + 30 * 86_400  # OpenAI's default for batch files
    assert (await call(client.files.retrieve, uploaded.id)).expires_at == uploaded.expires_at
    with pytest.raises(openai.BadRequestError, match="expires_after"):
        await call(
            client.files.create,
            file=("in.jsonl", data),
            purpose="batch",
            expires_after={"anchor": "created_at", "seconds": 60},
        )
    assert settings.database_url
    assert await _chunks_of(settings.database_url, uploaded.id) == 1
    async with await psycopg.AsyncConnection.connect(settings.database_url, autocommit=True) as conn:
        await conn.execute("UPDATE files SET expires_at = now() - interval '1 second' WHERE id = %s", (uploaded.id,))
    for gone in (client.files.retrieve, client.files.content, client.files.delete):
        with pytest.raises(openai.NotFoundError):
            await call(gone, uploaded.id)
    assert [f.id for f in (await call(client.files.list)).data] == [defaulted.id]
    database_url = settings.database_url

    async def freed() -> bool:
        return await _chunks_of(database_url, uploaded.id) == 0

    await until(freed, "the expired file's chunks freed by the API's sweeper")
    assert await _chunks_of(settings.database_url, defaulted.id) == 1


async def test_a_name_outside_latin_1_downloads_with_the_sdk_and_curl(
    api_url: str, tenant_key: KeyMaker, tmp_path: Path
) -> None:
    key = tenant_key("names")
    client = sdk(api_url, key)
    name = "übersetzung 翻訳 😀.jsonl"
    data = jsonl([translation_line("a", "b")])
    uploaded = await call(client.files.create, file=(name, data), purpose="batch")
    assert uploaded.filename == name
    response = await call(client.files.with_raw_response.content, uploaded.id)
    assert response.http_response.content == data
    disposition = response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="')
    exact = disposition.split("filename*=UTF-8''", 1)[1]
    assert unquote(exact) == name
    done = await asyncio.to_thread(
        subprocess.run,
        ["curl", "-sS", "-f", "-OJ", "-H", f"Authorization: Bearer {key}", f"{api_url}/v1/files/{uploaded.id}/content"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    saved = await asyncio.to_thread(lambda: [(p.name, p.read_bytes()) for p in tmp_path.iterdir()])
    assert len(saved) == 1 and saved[0][1] == data


async def test_a_run_s_upload_cannot_be_deleted_while_the_run_is_submitted(
    settings: Settings, tenant_key: KeyMaker
) -> None:
    key = tenant_key("deleter")
    lines = b"".join(_run_line(n) + b"\n" for n in range(1_500))
    with served(settings) as url:
        await _delete_while_submitted(url, key, lines)


async def _delete_while_submitted(url: str, key: str, lines: bytes) -> None:
    async with httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=None) as http:
        submitted = asyncio.create_task(http.post("/v1/runs?target_lang=fr", content=lines))
        refused: list[dict[str, Any]] = []
        while not submitted.done() and not refused:  # the upload is listed while the run is validated and queued
            for stored in (await http.get("/v1/files")).json()["data"]:
                answer = await http.delete(f"/v1/files/{stored['id']}")
                assert answer.status_code == 409, answer.text
                refused.append(answer.json()["error"])
        run = await submitted
        assert refused, "the run was queued before its upload could be seen"
        assert refused[0]["code"] == "file_in_use" and "upload of a run being submitted" in refused[0]["message"]
        assert run.status_code == 202, run.text
        assert run.json()["counts"]["total"] == 1_500 and run.json()["status"] == "running"
        assert (await http.get("/v1/files")).json()["data"] == []  # deleted by the submission itself


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/files/file-%00abc"),
        ("GET", "/v1/files/file-%00abc/content"),
        ("DELETE", "/v1/files/file-%00abc"),
        ("GET", "/v1/files?after=file-%00abc"),
        ("GET", "/v1/files?purpose=ba%00tch"),
    ],
)
async def test_nul_in_file_ids_and_queries_is_400_in_openai_s_shape(
    http: httpx.AsyncClient, make_key: KeyMaker, method: str, path: str
) -> None:
    answer = await http.request(method, path, headers=bearer(make_key(f"nul-{uuid.uuid4().hex[:8]}")))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_value" and error["param"]


def test_content_disposition_keeps_the_exact_name_and_an_ascii_fallback() -> None:
    header = content_disposition('a "b"\\c\r\n翻訳.jsonl')
    assert (
        header
        == "attachment; filename=\"a _b__c____.jsonl\"; filename*=UTF-8''a%20%22b%22%5Cc%0D%0A%E7%BF%BB%E8%A8%B3.jsonl"
    )
    header.encode("latin-1")  # what Starlette writes a header as


async def _asgi_get(app: FastAPI, path: str, query: str, key: str) -> tuple[int, dict[str, Any]]:
    """GET ``path`` by calling the application directly: a server may hand it any string (a lone surrogate
    from an ASGI server that decodes %-escapes with ``surrogateescape``)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogateescape"),
        "query_string": query.encode("utf-8", "surrogateescape"),
        "root_path": "",
        "headers": [(b"host", b"api.test"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("api.test", 80),
        "state": {},
    }
    await app(scope, receive, send)  # type: ignore[arg-type]
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/v1/files/file-\udced\udca0\udc80", ""),
        ("/v1/files/file-\udc80/content", ""),
    ],
)
async def test_lone_surrogates_in_file_ids_and_queries_are_400(
    app: FastAPI, http: httpx.AsyncClient, make_key: KeyMaker, path: str, query: str
) -> None:
    status, body = await _asgi_get(app, path, query, make_key(f"sur-{uuid.uuid4().hex[:8]}"))
    assert status == 400, body
    assert body["error"]["code"] == "invalid_value" and body["error"]["type"] == "invalid_request_error"
