"""Connections are a resource (issue 48): a cap per process, deadlines and a size limit on request heads.

Real sockets against a real uvicorn server in a thread, served as ``dragoman api`` serves it
(:class:`api.server_limits.LimitedConfig`), on both of uvicorn's HTTP/1.1 implementations; and one
``dragoman api`` process under a small ``ulimit -n``, where a flood of idle sockets used to take every
descriptor and leave other clients waiting in the listen queue.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from api.connection_guard import LimitedH11Protocol
from api.server_limits import ConnectionLimits, HttpImplementation, LimitedConfig, http_protocol
from contract.errors import ConfigurationError
from contract.settings import Settings
from tests.waiting import FOREVER, wait_for

ROOT = Path(__file__).resolve().parents[2]
IMPLEMENTATIONS: list[HttpImplementation] = ["httptools", "h11"]
LIMITS = ConnectionLimits(
    max_connections=1_000,
    max_requests_in_flight=100,
    backlog=2048,
    max_header_bytes=16 * 1024,
    header_timeout_s=FOREVER,
    keep_alive_s=5,
    busy_retry_after_s=1,
    open_file_limit=20_000,
    pooled_connections=0,
)


class HoldingApp:
    """``/hold`` answers once released (``held`` counts those waiting); anything else answers ``ok`` at once."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.held = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An ASGI application: nothing but HTTP."""
        if scope["type"] != "http":
            return
        if scope["path"] == "/hold":
            self.held += 1
            try:
                await asyncio.to_thread(self.released.wait)
            finally:
                self.held -= 1
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def serving(app: HoldingApp, limits: ConnectionLimits, http: HttpImplementation) -> Iterator[tuple[str, int]]:
    """``app`` behind ``limits`` on uvicorn in a thread; its host and port."""
    config = LimitedConfig(app, limits, http=http, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), "the server started (or its thread ended)", every=0.02)
    assert server.started, "the server did not start"
    port: int = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield "127.0.0.1", port
    finally:
        app.released.set()
        server.should_exit = True
        thread.join(timeout=FOREVER)


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (a read would return end of file, or the connection was reset)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionError:
        return True


def read_response(sock: socket.socket) -> bytes:
    """Everything the server writes before it closes ``sock``."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def read_ok(sock: socket.socket) -> bytes:
    """One whole ``200 ok`` response of :class:`HoldingApp` from ``sock``, however it is split."""
    response = b""
    while not response.endswith(b"\r\n\r\nok"):
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {response!r}"
        response += chunk
    return response


def error_code(response: bytes) -> str:
    """The ``error.code`` of a raw HTTP response in the API's error shape."""
    body = json.loads(response.partition(b"\r\n\r\n")[2])
    code: str = body["error"]["code"]
    return code


# --- Limits from the settings and the open-file limit ---


def test_unset_caps_are_derived_from_the_open_file_limit() -> None:
    settings = Settings()
    pooled = 32 + 100 + 1 + 2 * 8 + 8 + 1  # the default pools (api.server_limits.pooled_connections)

    roomy = ConnectionLimits.from_settings(settings, 20_000)
    assert (roomy.max_connections, roomy.max_requests_in_flight) == (10_000, 1_024)
    assert roomy.pooled_connections == pooled
    assert roomy.files_needed <= 20_000
    assert roomy.derived == ("max_requests_in_flight", "max_connections")

    tight = ConnectionLimits.from_settings(settings, 1_024)
    room = 1_024 - pooled - 64  # a quarter for the listen queue, then half each
    assert (tight.backlog, tight.max_requests_in_flight, tight.max_connections) == (room // 4, 301, 301)
    assert tight.files_needed <= 1_024
    assert "at most 301 open (from the open-file limit)" in tight.describe()

    set_by_hand = settings.model_copy(update={"api_max_connections": 50_000, "api_max_requests_in_flight": 10})
    limits = ConnectionLimits.from_settings(set_by_hand, 1_024)
    assert (limits.max_connections, limits.max_requests_in_flight, limits.derived) == (50_000, 10, ())
    assert limits.files_needed > limits.open_file_limit  # `dragoman api` warns at start

    with pytest.raises(ConfigurationError, match=r"ulimit -n"):
        ConnectionLimits.from_settings(settings, 200)


def test_the_operations_guide_table_is_what_the_limits_derive() -> None:
    guide = (ROOT / "docs" / "guides" / "operations" / "pools-and-overload.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\d,]+)(?: \([^)]*\))? \| ([\d,]+) \| ([\d,]+) \|$", guide, re.MULTILINE)
    assert len(rows) >= 3, "the guide lost its table of limits by `ulimit -n`"
    for open_files, connections, in_flight in rows:
        limits = ConnectionLimits.from_settings(Settings(), int(open_files.replace(",", "")))
        assert (f"{limits.max_connections:,}", f"{limits.max_requests_in_flight:,}") == (connections, in_flight)
    with pytest.raises(ConfigurationError):
        ConnectionLimits.from_settings(Settings(), 224)
    ConnectionLimits.from_settings(Settings(), 225)  # "under 225 with the default pools" stops the API


def test_the_settings_reach_the_server() -> None:
    settings = Settings(
        api_max_connections=7,
        api_max_requests_in_flight=3,
        api_max_header_bytes=4096,
        api_header_timeout_seconds=2.5,
        api_keep_alive_seconds=9,
    )
    limits = ConnectionLimits.from_settings(settings, 20_000)
    config = LimitedConfig(HoldingApp(), limits, http="h11")
    config.load()
    assert config.http_protocol_class is LimitedH11Protocol
    assert config.ws_protocol_class is None  # an upgraded connection would leave the table
    assert config.timeout_keep_alive == 9
    assert config.backlog == limits.backlog == 2048
    table = config.connection_table
    assert (table.max_connections, table.max_header_bytes, table.header_timeout_s) == (7, 4096, 2.5)
    assert config.gate.limits.max_requests_in_flight == 3
    assert http_protocol("auto").__name__ == "LimitedHttpToolsProtocol"  # what uvicorn would pick: httptools


# --- The cap on connections ---


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
def test_idle_sockets_past_the_cap_close_the_oldest_and_a_request_is_answered(http: HttpImplementation) -> None:
    idle_count, cap = 60, 20
    with serving(HoldingApp(), replace(LIMITS, max_connections=cap), http) as (host, port), ExitStack() as stack:
        idle = [stack.enter_context(socket.create_connection((host, port))) for _ in range(idle_count)]

        answer = httpx.get(f"http://{host}:{port}/ok", timeout=None)

        assert answer.status_code == 200
        # The request's connection came last: the oldest idle ones made room, the newest kept theirs.
        wait_for(lambda: sum(map(closed_by_server, idle)) >= idle_count - cap + 1, "the oldest idle sockets closed")
        closed = [index for index, sock in enumerate(idle) if closed_by_server(sock)]
        assert closed == list(range(len(closed)))


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
def test_at_the_cap_with_every_connection_busy_a_newcomer_is_refused_at_once(http: HttpImplementation) -> None:
    app = HoldingApp()
    with serving(app, replace(LIMITS, max_connections=3), http) as (host, port), ExitStack() as stack:
        busy = [stack.enter_context(socket.create_connection((host, port))) for _ in range(3)]
        for sock in busy:
            sock.sendall(b"GET /hold HTTP/1.1\r\nHost: api\r\n\r\n")
        wait_for(lambda: app.held == 3, "three requests in flight")

        with socket.create_connection((host, port)) as newcomer:
            refused = read_response(newcomer)

        assert refused.startswith(b"HTTP/1.1 503 ")
        assert b"retry-after: 1" in refused
        assert error_code(refused) == "server_busy"
        app.released.set()
        for sock in busy:  # the busy ones were left alone
            assert read_ok(sock).startswith(b"HTTP/1.1 200 ")


# --- Requests in flight ---


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
def test_requests_past_the_in_flight_limit_are_answered_503_at_once(http: HttpImplementation) -> None:
    app = HoldingApp()
    with serving(app, replace(LIMITS, max_requests_in_flight=2), http) as (host, port):
        url = f"http://{host}:{port}"
        holders = [threading.Thread(target=httpx.get, args=(f"{url}/hold",), kwargs={"timeout": None}) for _ in "ab"]
        for holder in holders:
            holder.start()
        wait_for(lambda: app.held == 2, "two requests in flight")

        refused = httpx.get(f"{url}/ok", timeout=None)

        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "server_busy"
        app.released.set()
        for holder in holders:
            holder.join()
        assert httpx.get(f"{url}/ok", timeout=None).status_code == 200


# --- The size of request heads ---


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
def test_a_complete_head_over_the_limit_is_answered_431(http: HttpImplementation) -> None:
    with serving(HoldingApp(), LIMITS, http) as (host, port), socket.create_connection((host, port)) as sock:
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: api\r\nX-Big: " + b"a" * 40 * 1024 + b"\r\n\r\n")

        answer = read_response(sock)

    assert answer.startswith(b"HTTP/1.1 431 ")
    assert error_code(answer) == "header_too_large"


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
def test_unfinished_heads_past_the_limit_are_cut_off_without_memory_growth(http: HttpImplementation) -> None:
    """Four clients each send a header of up to 64 MiB that never ends (the issue's attack, at a smaller size)."""
    attempt, chunk = 64 * 1024 * 1024, b"a" * 65536
    sent = [0] * 4
    cut_off = [False] * 4

    def attack(index: int, host: str, port: int) -> None:
        with socket.create_connection((host, port)) as sock:
            sock.sendall(b"GET /ok HTTP/1.1\r\nHost: api\r\nX-Big: ")
            try:
                while sent[index] < attempt:
                    sock.sendall(chunk)
                    sent[index] += len(chunk)
            except ConnectionError:
                cut_off[index] = True

    with serving(HoldingApp(), LIMITS, http) as (host, port):
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            attackers = [threading.Thread(target=attack, args=(index, host, port)) for index in range(4)]
            for attacker in attackers:
                attacker.start()
            for attacker in attackers:
                attacker.join()
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert httpx.get(f"http://{host}:{port}/ok", timeout=None).status_code == 200

    # Each was cut off after the limit plus what the sockets' buffers took, not after 64 MiB.
    assert all(cut_off), sent
    assert max(sent) < attempt / 2, sent
    assert peak < 8 * 1024 * 1024, f"the server's Python memory grew by {peak:,} bytes"


# --- Deadlines on request heads ---


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
@pytest.mark.parametrize("after_a_response", [False, True], ids=["first-request", "kept-alive"])
@pytest.mark.timeout(60)
def test_a_trickled_head_is_cut_off_at_the_header_timeout(http: HttpImplementation, after_a_response: bool) -> None:
    """The timeout is the behaviour under test: 1 s here, a byte every 50 ms would take for ever."""
    limits = replace(LIMITS, header_timeout_s=1.0)
    with serving(HoldingApp(), limits, http) as (host, port), socket.create_connection((host, port)) as sock:
        if after_a_response:
            sock.sendall(b"GET /ok HTTP/1.1\r\nHost: api\r\n\r\n")
            assert read_ok(sock).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: api\r\nX-Slow: ")
        while not select.select([sock], [], [], 0.05)[0]:  # a byte every 50 ms until the server answers
            sock.sendall(b"a")
        elapsed = time.monotonic() - started
        answer = read_response(sock)

    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert error_code(answer) == "request_timeout"
    assert elapsed >= 1.0 - 0.01  # libuv's timers have a millisecond's granularity, on a clock read once a turn


@pytest.mark.parametrize("http", IMPLEMENTATIONS)
@pytest.mark.timeout(60)
def test_a_connection_that_sends_nothing_is_closed_at_the_header_timeout(http: HttpImplementation) -> None:
    limits = replace(LIMITS, header_timeout_s=0.5)
    with serving(HoldingApp(), limits, http) as (host, port), socket.create_connection((host, port)) as sock:
        started = time.monotonic()

        assert read_response(sock) == b""  # closed without an answer, as an idle keep-alive connection is

        assert time.monotonic() - started >= 0.5 - 0.01  # libuv's clock: see above


# --- dragoman api itself, under a small open-file limit ---


@pytest.mark.timeout(180)
def test_dragoman_api_under_a_flood_of_idle_sockets_past_its_open_file_limit(settings_env: Settings) -> None:
    """600 idle sockets against ``ulimit -n 512``: before issue 48 the server ran out of descriptors and
    /healthz waited in the listen queue for ever; now the cap, derived from the limit, closes the oldest."""
    open_files, flood = 512, 600
    expected = ConnectionLimits.from_settings(Settings(), open_files)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DRAGOMAN_API_HEADER_TIMEOUT_SECONDS": str(FOREVER)}  # only the cap frees places
    command = f"ulimit -n {open_files} && exec {sys.executable} -m cli.main api --port {port}"
    process = subprocess.Popen(
        ["bash", "-c", command], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"

    def healthy_or_ended() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=None).status_code == 200
        except httpx.TransportError:
            return process.poll() is not None

    try:
        wait_for(healthy_or_ended, "dragoman api answers /healthz (or ended)")
        assert process.poll() is None, process.communicate()[0]
        with ExitStack() as stack:
            idle = [stack.enter_context(socket.create_connection(("127.0.0.1", port))) for _ in range(flood)]

            assert httpx.get(f"{url}/healthz", timeout=None).status_code == 200

            wait_for(
                lambda: sum(map(closed_by_server, idle)) >= flood - expected.max_connections,
                "the oldest idle sockets closed at the cap",
            )
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=FOREVER)[0]
    assert f"at most {expected.max_connections:,} open (from the open-file limit)" in output, output
    assert f"open-file limit {open_files}" in output, output
    # One line at the first, the rest counted and logged as the server stopped: none lost, none per socket.
    closed = re.findall(r"([\d,]+) idle connections closed at DRAGOMAN_API_MAX_CONNECTIONS", output)
    assert 0 < len(closed) < 5, output
    assert sum(int(count.replace(",", "")) for count in closed) >= flood - expected.max_connections, output
    assert "Traceback" not in output, output
