"""``/metrics``, ``/healthz`` and ``/readyz``: the worker's one HTTP port for Prometheus and probes.

A deliberately small HTTP/1.1 server on the worker's event loop (GET only, one request per
connection): it needs no framework, and a scrape or a probe never waits on the engine.

- ``/healthz``: 200 while the process and its event loop are alive (liveness), with dragoman's version.
- ``/readyz``: 200 when the engine is loaded and Redis and PostgreSQL answer; 503 with the
  reason otherwise, and while the worker drains on shutdown (readiness). On a Redis Cluster every
  primary must answer and report ``cluster_state:ok`` (``broker.redis_health``); a cluster or a
  sharded deployment adds its layout to the body (``"redis": {"cluster", "primaries", "shards"}``).
- ``/metrics``: the Prometheus text format; the queue gauges are refreshed from Redis first.

However many requests come in, Redis and PostgreSQL see at most one check at a time: the
service checks and the queue gauges are reused for ``CHECK_CACHE_S``, and PostgreSQL is checked
on one connection kept open (a flood of probes cannot use up the database's connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from broker.keys import served_keys
from broker.queue_stats import read_queue_stats
from broker.redis_client import open_redis
from broker.redis_health import check_redis
from contract.errors import ConfigurationError
from contract.log_format import scrub_secrets
from contract.models import ModelRouter
from contract.services import redact_url
from contract.settings import Settings
from contract.version import dragoman_version
from storage import DatabaseUnavailableError, ReadinessProbe
from worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0
CHECK_CACHE_S = 1.0  # how long a service check or a gauge refresh is reused
_REQUEST_TIMEOUT_S = 5.0
_MAX_REQUEST_BYTES = 8_192


@dataclass(frozen=True, slots=True)
class Readiness:
    """The outcome of the readiness checks: one line per check, ``"ok"`` or what is wrong."""

    checks: dict[str, str]
    redis: dict[str, object] = field(default_factory=dict)  # a cluster's or a sharded deployment's layout

    @property
    def ready(self) -> bool:
        """Every check passed."""
        return all(value == "ok" for value in self.checks.values())

    def to_json(self) -> str:
        """The ``/readyz`` response body."""
        body: dict[str, object] = {"ready": self.ready, "checks": self.checks}
        if self.redis:
            body["redis"] = self.redis
        return json.dumps(body)


def write_port_file(path: Path, port: int) -> None:
    """Tell an engine group's parent which port this engine bound (whole or not at all: written, then renamed)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(f"{port}\n", encoding="ascii")
    os.replace(partial, path)


class OpsServer:
    """Serves the worker's metrics and health endpoints until :meth:`close`.

    ``engine_state`` says whether the engine can take work (``"ok"`` or the reason it cannot,
    e.g. that the worker is draining).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        redis_url: str,
        database_url: str,
        metrics: WorkerMetrics,
        engine_state: Callable[[], str],
    ) -> None:
        self._settings = settings
        self._keys = served_keys(settings)
        self._routed = ModelRouter(settings.default_model, settings.model_routes).configured  # shown before a worker
        self._redis_url = redis_url
        self._metrics = metrics
        self._engine_state = engine_state
        self._redis = open_redis(redis_url, socket_timeout=PROBE_TIMEOUT_S, socket_connect_timeout=PROBE_TIMEOUT_S)
        self._postgres = ReadinessProbe(database_url)
        self._services_lock = asyncio.Lock()
        self._services: tuple[float, dict[str, str]] | None = None  # (when checked, the checks)
        self._redis_layout: dict[str, object] = {}  # the last Redis check's layout (a cluster or shards only)
        self._gauges_lock = asyncio.Lock()
        self._gauges_at = -CHECK_CACHE_S
        self._last_failing: dict[str, str] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port: int | None = None

    async def start(self) -> None:
        """Listen on ``metrics_host:metrics_port`` (port 0: any free port, see :attr:`port`)."""
        host, port = self._settings.metrics_host, self._settings.metrics_port
        try:
            self._server = await asyncio.start_server(self._accept, host, port)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve /metrics on {host}:{port}: {exc.strerror or exc}; set DRAGOMAN_METRICS_PORT to a "
                "free port (0 picks one) or DRAGOMAN_METRICS_ENABLED=false"
            ) from exc
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("serving /metrics, /healthz and /readyz on %s:%d", host, self.port)
        if self._settings.ops_port_file is not None:
            await asyncio.to_thread(write_port_file, self._settings.ops_port_file, self.port)

    async def close(self) -> None:
        """Stop listening, end open connections and close the probe connections."""
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        await self._postgres.close()
        await self._redis.aclose()

    async def readiness(self) -> Readiness:
        """The engine's state now; Redis and PostgreSQL as checked within the last ``CHECK_CACHE_S``."""
        services = await self._service_checks()
        return Readiness({"engine": self._engine_state(), **services}, self._redis_layout)

    async def _service_checks(self) -> dict[str, str]:
        """Redis and PostgreSQL (each within ``PROBE_TIMEOUT_S``), one check at a time, reused a while."""
        async with self._services_lock:
            if self._services is not None and time.monotonic() - self._services[0] < CHECK_CACHE_S:
                return self._services[1]
            redis_state, postgres_state = await asyncio.gather(self._check_redis(), self._check_postgres())
            checks = {"redis": scrub_secrets(redis_state), "postgres": scrub_secrets(postgres_state)}
            self._services = (time.monotonic(), checks)
            return checks

    async def render_metrics(self) -> bytes:
        """The Prometheus exposition, with the queue gauges refreshed (kept as they were if Redis fails)."""
        async with self._gauges_lock:  # concurrent scrapes share one refresh
            if time.monotonic() - self._gauges_at >= CHECK_CACHE_S:
                try:
                    stats = await asyncio.wait_for(
                        read_queue_stats(self._redis, self._keys, models=self._routed, with_workers=False),
                        PROBE_TIMEOUT_S,
                    )
                    self._metrics.update_queue(stats)
                except (TimeoutError, RedisError, OSError) as exc:
                    log.warning("queue gauges not refreshed: Redis at %s: %s", redact_url(self._redis_url), exc)
                self._gauges_at = time.monotonic()
        return generate_latest(self._metrics.registry)

    async def _check_redis(self) -> str:
        try:
            health = await asyncio.wait_for(check_redis(self._redis, self._keys), PROBE_TIMEOUT_S)
        except (TimeoutError, RedisError, OSError) as exc:
            return f"Redis at {redact_url(self._redis_url)} unreachable: {exc or type(exc).__name__}"
        self._redis_layout = health.to_dict() if health.layout else {}
        if not health.ok:
            return f"Redis Cluster at {redact_url(self._redis_url)} cannot serve every shard: " + "; ".join(
                health.problems
            )
        return "ok"

    async def _check_postgres(self) -> str:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self._postgres.check()
            return "ok"
        except (TimeoutError, DatabaseUnavailableError) as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"PostgreSQL unreachable: {message}"

    # HTTP ------------------------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._serve(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            method, path = _request_line(head)
            status, content_type, body = await self._route(method, path)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            status, content_type, body = 400, "text/plain; charset=utf-8", b"bad request\n"
        except ConnectionError:
            writer.close()
            return
        try:
            writer.write(_response(status, content_type, body))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
        handlers: dict[str, Callable[[], Awaitable[tuple[int, str, bytes]]]] = {
            "/metrics": self._metrics_page,
            "/healthz": self._healthz,
            "/readyz": self._readyz,
        }
        handler = handlers.get(path)
        if handler is None:
            return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz or /readyz\n"
        if method != "GET":
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        return await handler()

    async def _metrics_page(self) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, await self.render_metrics()

    async def _healthz(self) -> tuple[int, str, bytes]:
        body = json.dumps({"alive": True, "version": dragoman_version()})
        return 200, "application/json", body.encode() + b"\n"

    async def _readyz(self) -> tuple[int, str, bytes]:
        readiness = await self.readiness()
        failing = {k: v for k, v in readiness.checks.items() if v != "ok"}
        if failing and failing != self._last_failing:  # once per change, not once per probe of a flood
            log.warning("not ready: %s", failing)
        self._last_failing = failing
        return (200 if readiness.ready else 503), "application/json", readiness.to_json().encode() + b"\n"


def _request_line(head: bytes) -> tuple[str, str]:
    """Method and path (query string dropped) of an HTTP request head."""
    if len(head) > _MAX_REQUEST_BYTES:
        raise ValueError("request head too large")
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError("not an HTTP request line")
    return parts[0], parts[1].split("?", 1)[0]


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _response(status: int, content_type: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
