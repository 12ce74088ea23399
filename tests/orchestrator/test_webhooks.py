"""Webhook deliveries are safe edges: public addresses only, no redirects, a total deadline, a queue of their own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Network, IPv6Network, ip_address
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis

from broker.keys import RedisKeys
from contract.settings import Settings
from orchestrator.webhook_addresses import refusal
from orchestrator.webhooks import WebhookDeliveryError, WebhookRefusedError, post_signed
from producer.client import Client
from tests.waiting import FOREVER, until, wait_for
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

LOOPBACK = [IPv4Network("127.0.0.0/8")]


class _Receiver(BaseHTTPRequestHandler):
    """Answers ``answer`` (with a ``Location`` when it is a redirect) after ``hold`` is set."""

    answer: ClassVar[int] = 200
    location: ClassVar[str] = ""
    hold: ClassVar[threading.Event]
    arrived: ClassVar[threading.Event]
    received: ClassVar[list[tuple[dict[str, str], bytes]]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.arrived.set()
        self.hold.wait()
        self.send_response(self.answer)
        if self.location:
            self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class Receiver:
    """A webhook receiver on 127.0.0.1 in a thread of this test."""

    def __init__(self, answer: int = 200, location: str = "", held: bool = False) -> None:
        self.hold = threading.Event()
        if not held:
            self.hold.set()
        attrs = {"answer": answer, "location": location, "hold": self.hold, "arrived": threading.Event()}
        self.handler: Any = type("Handler", (_Receiver,), {**attrs, "received": []})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def received(self) -> list[tuple[dict[str, str], bytes]]:
        return list(self.handler.received)

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _post(url: str, timeout: float = FOREVER, allowed: Any = ()) -> int:
    return post_signed(url, {"event": "run.completed"}, "s3cret", timeout, allowed_networks=allowed)


# Which addresses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.3.2.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00:ec2::254", "private"),  # AWS's IPv6 metadata address
        ("100.64.0.1", "non-public"),  # carrier-grade NAT
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local"),
        ("2002:7f00:1::", "loopback"),  # 6to4 around 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 around 169.254.169.254
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", ""),  # reserved (private or non-public, by Python version)
        # Every IPv6 form that embeds an IPv4 address answers for the IPv4 address (issue 33):
        ("::127.0.0.1", "loopback"),  # IPv4-compatible, ::/96
        ("::10.0.0.1", "private"),
        ("::169.254.169.254", "link-local"),
        ("::ffff:10.1.2.3", "private"),  # IPv4-mapped, ::ffff:0:0/96
        ("::ffff:0:127.0.0.1", "loopback"),  # IPv4-translated, ::ffff:0:0:0/96
        ("::ffff:0:169.254.169.254", "link-local"),
        ("64:ff9b::10.0.0.1", "private"),  # NAT64, 64:ff9b::/96
        ("64:ff9b:1::127.0.0.1", "local-use NAT64"),  # NAT64 local use, 64:ff9b:1::/48
        ("64:ff9b:1:7f00:0:100::", "local-use NAT64"),  # the same, RFC 6052's /48 layout
        ("64:ff9b:1::8.8.8.8", "local-use NAT64"),
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4, 2002::/16
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, 2001::/32: client 127.0.0.1
        ("2001:0:a00:1:8000:63bf:3fff:fdd2", "private"),  # Teredo via server 10.0.0.1
    ],
)
def test_internal_addresses_are_refused(address: str, kind: str) -> None:
    reason = refusal(ip_address(address))
    assert reason is not None and kind in reason


@pytest.mark.parametrize(
    "address",
    [
        "93.184.215.14",
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
        "2606:4700:4700::1111",
        "8.8.8.8",
        "64:ff9b::8.8.8.8",  # NAT64 to a public IPv4 address
        "::ffff:8.8.8.8",
        "2002:808:808::1",  # 6to4 around a public address
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(ip_address(address)) is None


def test_the_allow_list_lets_internal_receivers_through() -> None:
    allowed = [IPv4Network("10.20.0.0/16"), IPv6Network("fd12::/16")]
    assert refusal(ip_address("10.20.3.4"), allowed) is None
    assert refusal(ip_address("fd12::5"), allowed) is None
    assert refusal(ip_address("::ffff:10.20.3.4"), allowed) is None
    assert refusal(ip_address("10.21.0.1"), allowed) is not None
    assert refusal(ip_address("127.0.0.1"), allowed) is not None
    assert refusal(ip_address("::ffff:0:10.20.3.4"), allowed) is None  # IPv4-translated, inside the allowed net
    assert refusal(ip_address("::ffff:0:10.21.0.1"), allowed) is not None


def test_settings_read_the_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS", '["10.0.0.0/8", "fd00::/8"]')
    assert Settings().webhook_allowed_networks == [IPv4Network("10.0.0.0/8"), IPv6Network("fd00::/8")]
    assert Settings.model_construct().webhook_allowed_networks == []  # nothing internal by default
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS", '["not a network"]')
    with pytest.raises(ValueError, match="webhook_allowed_networks"):
        Settings()


# Deliveries -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "0.0.0.0"],
)
def test_a_callback_to_this_host_is_refused_before_connecting(receiver: Receiver, host: str) -> None:
    with pytest.raises(WebhookRefusedError, match="DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS"):
        _post(receiver.url(host))
    assert receiver.received == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://10.0.0.1:8080/admin",
        "ftp://example.com/x",
        "file:///etc/passwd",
        "http:///no-host",
    ],
)
def test_metadata_private_and_odd_urls_are_refused(url: str) -> None:
    with pytest.raises(WebhookRefusedError):
        _post(url)


def test_an_allowed_internal_receiver_gets_the_signed_delivery(receiver: Receiver) -> None:
    assert _post(receiver.url(), allowed=LOOPBACK) == 200
    [(headers, body)] = receiver.received
    assert json.loads(body) == {"event": "run.completed"} and headers["X-Dragoman-Signature"].startswith("sha256=")


def test_redirects_are_not_followed(receiver: Receiver) -> None:
    redirecting = Receiver(answer=302, location=receiver.url(path="/elsewhere"))
    try:
        with pytest.raises(WebhookDeliveryError, match="302; redirects are not followed"):
            _post(redirecting.url(), allowed=LOOPBACK)
    finally:
        redirecting.close()
    assert len(redirecting.received) == 1 and receiver.received == []


def test_the_connection_goes_to_the_address_that_was_checked(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a second lookup answering another address must not be used."""
    real = socket.getaddrinfo
    answers = ["127.0.0.1", "10.255.255.1"]  # the second answer would go nowhere (and is not loopback)
    lookups: list[str] = []

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.example":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return real(answers[min(len(lookups), 2) - 1], port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    allowed = [*LOOPBACK, IPv4Network("10.0.0.0/8")]
    assert _post(receiver.url("hooks.example"), allowed=allowed) == 200
    assert lookups == ["hooks.example"]
    [(headers, _)] = receiver.received
    assert headers["Host"] == f"hooks.example:{receiver.port}"


@pytest.mark.timeout(60)
def test_a_receiver_that_trickles_its_answer_is_cut_at_the_deadline() -> None:
    """Each byte comes well within a socket timeout, so only a total deadline ends the delivery."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b"X")  # one endless header line, a byte at a time
                except OSError:
                    return
                stop.wait(0.1)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    try:
        with pytest.raises(WebhookDeliveryError, match="within the 1s delivery deadline"):
            _post(url, timeout=1.0, allowed=LOOPBACK)
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)


def test_a_refusal_does_not_show_credentials_of_the_url() -> None:
    with pytest.raises(WebhookRefusedError) as caught:
        _post("http://user:hunter2@127.0.0.1:9/hook?token=t0ps3cret")
    assert "hunter2" not in str(caught.value) and "t0ps3cret" not in str(caught.value)


# A queue of its own ---------------------------------------------------------------------------


@pytest.fixture
def rq_worker(settings_env: Settings) -> Iterator[subprocess.Popen[bytes]]:
    """A real `dragoman rq-worker` (orchestration here, webhooks in its child) on this test's prefix."""
    env = {
        **os.environ,
        "DRAGOMAN_WEBHOOK_SECRET": "s3cret",
        "DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.0/8"]',
        "DRAGOMAN_WEBHOOK_TIMEOUT_SECONDS": str(FOREVER),  # the held receiver is not cut by the deadline here
    }
    process = subprocess.Popen([sys.executable, "-m", "cli.main", "rq-worker"], env=env)
    yield process
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=FOREVER) == 0


def _write(path: Path) -> Path:
    path.write_text(json.dumps({"custom_id": "x", "text": "hello"}) + "\n")
    return path


async def _until(condition: Callable[[], bool], what: str) -> None:
    """:func:`tests.waiting.until` with ``condition`` on a thread (it blocks: a query, a lookup)."""
    await until(lambda: asyncio.to_thread(condition), what)


@pytest.mark.timeout(300)
async def test_a_slow_receiver_does_not_hold_up_other_runs(
    start_worker: WorkerFactory, rq_worker: subprocess.Popen[bytes], client: Client, tmp_path: Path, pg: Any
) -> None:
    slow = Receiver(held=True)
    client.settings.webhook_secret = "s3cret"
    try:
        async with start_worker(DeterministicEngine()):
            first = client.submit_run(
                _write(tmp_path / "a.jsonl"), source_lang="en", target_lang="fr", callback_url=slow.url()
            )
            await _until(slow.handler.arrived.is_set, "the first run's webhook reaches its receiver")
            # The receiver now holds that delivery; a second run still finishes meanwhile.
            second = client.submit_run(_write(tmp_path / "b.jsonl"), source_lang="en", target_lang="fr")
            await _until(lambda: client.get_run(second).status == "completed", "the second run completes")
            assert not slow.hold.is_set() and rq_worker.poll() is None
        slow.hold.set()

        def delivered() -> bool:
            row = pg.execute("SELECT webhook_status FROM runs WHERE id = %s", (first,)).fetchone()
            return bool(row and row[0] == "delivered")

        await _until(delivered, "the held delivery completes once released")
    finally:
        slow.close()


def _webhook_worker_of(pid: int) -> int | None:
    """The `rq-worker --queue webhooks` child of process ``pid`` (RQ's scheduler is a child too)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    for child in path.read_text().split() if path.exists() else []:
        with contextlib.suppress(OSError):
            if b"webhooks" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"):
                return int(child)
    return None


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an exited orphan waiting for init to reap it)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _idle_rq_workers_on(redis_url: str, queue: str) -> int:
    """How many RQ workers of ``queue`` wait for work (past their start-up)."""
    from rq import Worker

    connection = redis.Redis.from_url(redis_url)
    try:
        workers = Worker.all(connection=connection)
        return sum(queue in worker.queue_names() and worker.get_state() == "idle" for worker in workers)
    finally:
        connection.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("when", ["starting", "working"])
def test_the_rq_worker_stops_when_its_webhook_worker_dies(settings_env: Settings, when: str, tmp_path: Path) -> None:
    """Deliveries must not silently stop: the rq-worker exits 1, and its supervisor restarts both."""
    keys = RedisKeys.from_settings(settings_env)
    assert settings_env.redis_url
    log_path = tmp_path / "rq-worker.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen([sys.executable, "-m", "cli.main", "rq-worker"], stderr=log_file)
    try:
        child = wait_for(lambda: _webhook_worker_of(process.pid), "the webhook worker child started")
        assert child is not None
        if when == "working":  # both RQ workers are up and waiting for tasks
            queues = (keys.orchestration_queue, keys.webhook_queue)
            redis_url = settings_env.redis_url
            wait_for(lambda: all(_idle_rq_workers_on(redis_url, q) for q in queues), "both RQ workers waiting for work")
        os.kill(child, signal.SIGKILL)
        assert process.wait(timeout=FOREVER) == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "the webhook worker exited" in log_path.read_text()


@pytest.mark.timeout(300)
def test_the_webhook_worker_stops_when_its_rq_worker_is_killed(settings_env: Settings, tmp_path: Path) -> None:
    """The child has a session of its own: a parent killed with SIGKILL used to leave it working for nobody."""
    keys = RedisKeys.from_settings(settings_env)
    assert settings_env.redis_url
    with (tmp_path / "rq-worker.log").open("wb") as log_file:
        process = subprocess.Popen([sys.executable, "-m", "cli.main", "rq-worker"], stderr=log_file)
    child: int | None = None
    try:
        child = wait_for(lambda: _webhook_worker_of(process.pid), "the webhook worker child started")
        assert child is not None
        orphan = child
        redis_url = settings_env.redis_url
        wait_for(lambda: _idle_rq_workers_on(redis_url, keys.webhook_queue), "the webhook worker waiting for work")
        process.kill()
        process.wait()
        wait_for(lambda: not _running(orphan), "the webhook worker gone with its rq-worker")
    finally:
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
            process.wait()
