"""``/metrics``, ``/healthz`` and ``/readyz`` of a whole engine group, on the port one worker would serve.

``dragoman worker --engines N`` runs one worker process per engine (:mod:`worker.supervisor`), and
each serves its own ops endpoints on a port of its own. The parent serves
``DRAGOMAN_METRICS_PORT`` for the engine group, so that Prometheus and the kubelet's probes find an engine group
where they would find a single worker:

- ``/metrics``: every engine's ``/metrics``, each sample labelled ``engine="<name>"``
  (:mod:`worker.exposition`), and the engine group's own ``dragoman_engine_up`` (1 when the engine
  answers ``/readyz`` with 200) and ``dragoman_engine_restarts_total``. An engine that does not
  answer adds ``dragoman_engine_up 0`` and nothing else; the scrape still answers 200.
- ``/readyz``: 200 when every engine's ``/readyz`` answers 200, else 503; the JSON body names each
  engine and its state: its own ``/readyz`` body, or ``starting``, ``restarting``,
  ``not answering: ...``.
- ``/healthz``: 200 while the supervisor runs (the parent's liveness).

The supervisor's loop is synchronous, so this is a standard-library threading HTTP server on a
thread of its own; the children are asked concurrently (``FETCH_TIMEOUT_S`` each), so a scrape
takes as long as the slowest engine, not the sum. Its owner calls :meth:`EngineGroupOpsServer.close`
(or leaves its ``with`` block), which joins every thread it started.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST

from contract.errors import ConfigurationError
from contract.version import dragoman_version
from worker.exposition import MetricFamilies, escape_label_value
from worker.supervisor import ChildStatus, OpsAddress

log = logging.getLogger(__name__)

ENGINE_LABEL = "engine"
"""The label every engine's samples get on the engine group's ``/metrics``: the engine's name (``gpu0-e1``)."""

FETCH_TIMEOUT_S = 2.0
"""How long the engine group waits for one engine's answer (connecting, then each read)."""

MAX_ANSWER_BYTES = 32 * 2**20
"""The largest ``/metrics`` page read from an engine (a real one is some hundred KiB)."""

_REQUEST_TIMEOUT_S = 5.0  # a client that sends its request slower than this is dropped
_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"


class EngineGroupView(Protocol):
    """What the ops server reads from the supervisor (:class:`worker.supervisor.EngineSupervisor`)."""

    @property
    def stopping(self) -> bool:
        """The engine group is stopping: its engines drain."""
        ...

    def children(self) -> Sequence[ChildStatus]:
        """Each engine's phase, process id, restarts and ops address now."""
        ...


@dataclass(frozen=True, slots=True)
class ChildAnswer:
    """What one engine's endpoint answered: the status and body, or why it did not (``status`` None)."""

    status: int | None
    body: bytes = b""
    error: str = ""


@dataclass(frozen=True, slots=True)
class EngineReadiness:
    """One engine's line in the engine group's ``/readyz``: ready or not, and its state (a JSON value)."""

    name: str
    ready: bool
    state: object
    pid: int | None
    restarts: int

    def to_json(self) -> dict[str, object]:
        """The engine's entry in the ``/readyz`` body."""
        return {"ready": self.ready, "state": self.state, "pid": self.pid, "restarts": self.restarts}


def fetch(address: OpsAddress, path: str, timeout: float = FETCH_TIMEOUT_S) -> ChildAnswer:
    """GET ``path`` from an engine's ops port; never raises (an unreachable engine is an answer too)."""
    connection = http.client.HTTPConnection(address.host, address.port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Accept": "text/plain"})
        response = connection.getresponse()
        body = response.read(MAX_ANSWER_BYTES + 1)
        if len(body) > MAX_ANSWER_BYTES:
            return ChildAnswer(None, error=f"answer to {path} over {MAX_ANSWER_BYTES} bytes")
        return ChildAnswer(response.status, body)
    except (OSError, http.client.HTTPException) as exc:
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__
        return ChildAnswer(None, error=f"{reason} ({address.host}:{address.port})")
    finally:
        connection.close()


def engine_answers_ready(child: ChildStatus) -> bool:
    """Whether an engine of an engine group has started (the supervisor starts the next one on its GPU only then).

    Its ``/readyz`` answers with the engine's own check ``ok``, whatever Redis and PostgreSQL say: an
    outage of theirs must not hold back the other engines' start.
    """
    if child.ops is None:
        return False
    answer = fetch(child.ops, "/readyz")
    if answer.status == 200:
        return True
    body = _json_or_text(answer.body) if answer.status is not None else None
    checks = body.get("checks") if isinstance(body, dict) else None
    return isinstance(checks, dict) and checks.get("engine") == "ok"


class EngineGroupOpsServer:
    """Serves an engine group's ``/metrics``, ``/healthz`` and ``/readyz`` on a thread until :meth:`close`.

    ``port`` 0 listens on any free port (:attr:`port` says which once started).
    """

    def __init__(
        self, engine_group: EngineGroupView, *, host: str, port: int, fetch_timeout: float = FETCH_TIMEOUT_S
    ) -> None:
        self._engine_group = engine_group
        self._host = host
        self._requested_port = port
        self._fetch_timeout = fetch_timeout
        self._lock = threading.Lock()
        self._answered: dict[str, int | None] = {}  # engine -> the pid that last answered its /readyz
        self._reported: set[str] = set()  # bad metrics lines already logged
        self._server: _EngineGroupHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.port: int | None = None

    def start(self) -> None:
        """Listen on ``host:port`` and serve on a daemon thread; :class:`ConfigurationError` if it cannot."""
        try:
            server = _EngineGroupHTTPServer((self._host, self._requested_port), self)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve the engine group's /metrics on {self._host}:{self._requested_port}: "
                f"{exc.strerror or exc}; set DRAGOMAN_METRICS_PORT to a free port (0 picks one) or "
                "DRAGOMAN_METRICS_ENABLED=false"
            ) from exc
        self._server = server
        self.port = int(server.server_address[1])
        workers = max(4, 2 * len(self._engine_group.children()))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dragoman-engine-group-ops-fetch")
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="dragoman-engine-group-ops", daemon=True
        )
        self._thread.start()
        log.info("serving the engine group's /metrics, /healthz and /readyz on %s:%d", self._host, self.port)

    def close(self) -> None:
        """Stop listening, wait for requests being answered, and join every thread this server started."""
        if self._server is not None:
            self._server.shutdown()  # returns once serve_forever has
            self._server.server_close()  # joins the request threads
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> EngineGroupOpsServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # The three answers ----------------------------------------------------------------------

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """The status, content type and body for a GET of ``path`` (the query string already removed)."""
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.render_metrics()
        if path == "/readyz":
            ready, engines = self.readiness()
            body = {
                "ready": ready,
                "stopping": self._engine_group.stopping,
                "engines": {engine.name: engine.to_json() for engine in engines},
            }
            return (200 if ready else 503), _JSON, json.dumps(body).encode() + b"\n"
        if path == "/healthz":
            body = {"alive": True, "version": dragoman_version(), "engines": len(self._engine_group.children())}
            return 200, _JSON, json.dumps(body).encode() + b"\n"
        return 404, _TEXT, b"not found: try /metrics, /healthz or /readyz\n"

    def readiness(self) -> tuple[bool, list[EngineReadiness]]:
        """Every engine's readiness now; the engine group is ready when each is and it is not stopping."""
        children = list(self._engine_group.children())
        answers = self._fetch_each([(child, "/readyz") for child in children])
        engines = [self._readiness_of(child, answer) for child, answer in zip(children, answers, strict=True)]
        return (not self._engine_group.stopping and all(e.ready for e in engines)), engines

    def render_metrics(self) -> bytes:
        """Every engine's metrics, labelled, after the engine group's ``dragoman_engine_up`` and restarts."""
        children = list(self._engine_group.children())
        answers = self._fetch_each([(c, "/metrics") for c in children] + [(c, "/readyz") for c in children])
        pages, ready = answers[: len(children)], answers[len(children) :]
        engines = [self._readiness_of(child, answer) for child, answer in zip(children, ready, strict=True)]
        families = MetricFamilies()
        families.add_exposition(_engine_group_series(children, engines))
        for child, page in zip(children, pages, strict=True):
            if page.status != 200:
                continue  # not answering (its dragoman_engine_up says so), or an error page
            problems = families.add_exposition(page.body.decode("utf-8", "replace"), (ENGINE_LABEL, child.name))
            for problem in problems:
                self._report_once(f"engine {child.name}: left out of /metrics: {problem}")
        return families.render().encode()

    # Asking the engines ---------------------------------------------------------------------

    def _fetch_each(self, requests: Sequence[tuple[ChildStatus, str]]) -> list[ChildAnswer]:
        """Each ``(engine, path)`` asked at once; an engine that is not running is not asked."""
        pool = self._pool
        futures: list[Future[ChildAnswer] | None] = [
            pool.submit(fetch, child.ops, path, self._fetch_timeout)
            if pool is not None and child.phase == "running" and child.ops is not None
            else None
            for child, path in requests
        ]
        wait_for_futures([f for f in futures if f is not None], timeout=self._fetch_timeout + 1.0)
        late = ChildAnswer(None, error=f"no answer within {self._fetch_timeout:g} s")
        unasked = ChildAnswer(None, error="not running")
        return [unasked if f is None else (f.result() if f.done() else late) for f in futures]

    def _readiness_of(self, child: ChildStatus, answer: ChildAnswer) -> EngineReadiness:
        """An engine's readiness from its phase and its ``/readyz`` answer."""
        ready = False
        state: object
        if child.phase == "restarting":
            state = "restarting"
        elif child.phase == "stopped":
            state = "stopped"
        elif child.ops is None:
            state = "starting"  # it has not opened its ops port yet
        elif answer.status is not None:
            with self._lock:
                self._answered[child.name] = child.pid
            ready = answer.status == 200
            state = _json_or_text(answer.body)
        else:
            with self._lock:
                answered_before = self._answered.get(child.name) == child.pid
            # A process that has not answered yet is loading its engine (it serves once loaded).
            state = f"not answering: {answer.error}" if answered_before else "starting"
        return EngineReadiness(child.name, ready, state, child.pid, child.restarts)

    def _report_once(self, message: str) -> None:
        """Log a problem with an engine's page once, not at every scrape."""
        with self._lock:
            if message in self._reported or len(self._reported) >= 1_000:
                return
            self._reported.add(message)
        log.warning("%s", message)


def _engine_group_series(children: Sequence[ChildStatus], engines: Sequence[EngineReadiness]) -> str:
    """The engine group's own series, in the text format: each engine's ``up`` and its restarts."""
    up = [f'dragoman_engine_up{{{ENGINE_LABEL}="{escape_label_value(e.name)}"}} {int(e.ready)}' for e in engines]
    restarts = [
        f'dragoman_engine_restarts_total{{{ENGINE_LABEL}="{escape_label_value(c.name)}"}} {c.restarts}'
        for c in children
    ]
    lines = [
        "# HELP dragoman_engine_up Whether the engine's worker answered /readyz with 200 at this scrape (1) or not (0)",
        "# TYPE dragoman_engine_up gauge",
        *up,
        "# HELP dragoman_engine_restarts_total Times the engine group restarted the engine's worker process",
        "# TYPE dragoman_engine_restarts_total counter",
        *restarts,
    ]
    return "".join(f"{line}\n" for line in lines)


def _json_or_text(body: bytes) -> object:
    """An engine's ``/readyz`` body: its JSON, or its text if it is not JSON."""
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed: object = json.loads(text)
    except ValueError:
        return text
    return parsed


class _EngineGroupHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server whose request threads are joined when it closes (not left as daemons)."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], ops: EngineGroupOpsServer) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.ops = ops
        super().__init__(address, _Handler)

    def process_request_thread(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        """Answer one connection on its own thread, named so that a leftover one is easy to spot."""
        threading.current_thread().name = "dragoman-engine-group-ops-request"
        super().process_request_thread(request, client_address)

    def handle_error(self, request: object, client_address: object) -> None:
        """Log a request that failed inside the server (instead of printing to stderr)."""
        log.exception("the engine group's ops server failed to answer %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    """GET ``/metrics``, ``/healthz`` and ``/readyz``, one request per connection."""

    server: _EngineGroupHTTPServer
    timeout = _REQUEST_TIMEOUT_S

    def do_GET(self) -> None:
        """Answer from :meth:`EngineGroupOpsServer.answer`."""
        started = time.monotonic()
        status, content_type, body = self.server.ops.answer(self.path.split("?", 1)[0])
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        log.debug("%s %d in %.3fs", self.path, status, time.monotonic() - started)

    def log_message(self, format: str, *args: object) -> None:
        """Requests go to the debug log, not to stderr."""
        log.debug("engine group ops: " + format, *args)
