"""The other tenant of ``bench.hostile_api``: an ordinary client polling the API while an attack runs.

In a process of its own (the attacker's client work in the benchmark's process must not delay it),
one request at a time, each on a new connection as a new client's would be, ``PAUSE_S`` apart: by
turns ``GET /v1/jobs/{id}`` of a job of its own and ``POST /v1/jobs?wait=10`` of one short job (a
submit, the worker's translation and the wake-up). Every request is timed, whatever its end: an
answer (its status), or an error (connection refused or reset, a timeout after ``timeout_s``).
"""

from __future__ import annotations

import http.client
import json
import math
import multiprocessing
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from types import TracebackType
from typing import Any

PAUSE_S = 0.05
JOB = {"text": "A short text of the other tenant.", "source_lang": "en", "target_lang": "fr"}


@dataclass(frozen=True)
class Sample:
    """One request: what it was, when it started (seconds after the poller's first), how long it took, its end."""

    route: str
    started_s: float
    seconds: float
    status: int | None
    error: str | None


def _request(host: str, port: int, method: str, path: str, key: str, body: bytes | None, timeout_s: float) -> int:
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return int(response.status)
    finally:
        connection.close()


def poll(base: str, key: str, job_id: str, timeout_s: float, stop: Event, results: Connection) -> None:
    """Poll until ``stop`` is set (the request in flight is finished first); send the samples on ``results``.

    The first sample is sent alone as soon as it is taken: the sign that the poller runs."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    routes = [
        ("GET /v1/jobs/{id}", "GET", f"/v1/jobs/{job_id}", None),
        ("POST /v1/jobs?wait=10", "POST", "/v1/jobs?wait=10", json.dumps(JOB).encode()),
    ]
    samples: list[Sample] = []
    origin = time.monotonic()
    turn = 0
    while not stop.is_set() or not samples:
        name, method, path, body = routes[turn % len(routes)]
        turn += 1
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        try:
            status = _request(host, int(port), method, path, key, body, timeout_s)
        except TimeoutError:
            error = "timeout"
        except OSError as exc:
            error = type(exc).__name__
        except http.client.HTTPException as exc:
            error = type(exc).__name__
        samples.append(Sample(name, started - origin, time.monotonic() - started, status, error))
        if len(samples) == 1:
            results.send("ready")
        time.sleep(PAUSE_S)
    results.send(samples)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def summary(samples: list[Sample]) -> dict[str, Any]:
    """The other tenant's view: requests, latency p50/p99/worst (s; the worst of each route apart: a reading and a
    ``?wait=`` whose job the worker may be slow to reach), 5xx answers, errors by kind, other statuses."""
    seconds = [sample.seconds for sample in samples]
    errors: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for sample in samples:
        if sample.error is not None:
            errors[sample.error] = errors.get(sample.error, 0) + 1
        else:
            statuses[str(sample.status)] = statuses.get(str(sample.status), 0) + 1
    return {
        "requests": len(samples),
        "p50_s": round(percentile(seconds, 0.5), 3),
        "p99_s": round(percentile(seconds, 0.99), 3),
        "worst_s": round(max(seconds), 3),
        "worst_by_route_s": {
            route: round(max(sample.seconds for sample in samples if sample.route == route), 3)
            for route in sorted({sample.route for sample in samples})
        },
        "5xx": sum(n for status, n in statuses.items() if status.startswith("5")),
        "errors": errors,
        "statuses": dict(sorted(statuses.items())),
    }


class Poller:
    """The polling process while the ``with`` block runs; :attr:`samples` once it has ended."""

    def __init__(self, base: str, key: str, job_id: str, timeout_s: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._results, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=poll, args=(base, key, job_id, timeout_s, self._stop, sender), name="bench-hostile-poller"
        )
        self._timeout_s = timeout_s
        self.samples: list[Sample] = []

    def __enter__(self) -> Poller:
        self._process.start()
        if not self._results.poll(60 + self._timeout_s) or self._results.recv() != "ready":
            self._process.kill()
            raise SystemExit("the polling tenant never got its first answer")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._results.poll(self._timeout_s + 30):
            self.samples = self._results.recv()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
