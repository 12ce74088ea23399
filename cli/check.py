"""``dragoman check``: is this deployment able to work? For container health checks and operators."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

import redis

from broker.keys import RedisKeys
from contract.services import redact_url
from contract.settings import Settings
from contract.sync_bridge import run_sync
from storage import ping
from storage.embedded import resolve_urls


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """One live worker's heartbeat."""

    name: str
    in_flight: int
    written: int
    reclaimed: int
    postgres_down_since: float | None


@dataclass(slots=True)
class HealthReport:
    """What ``dragoman check`` found; ``healthy`` decides its exit code."""

    redis_ok: bool = False
    postgres_ok: bool = False
    workers: list[WorkerBeat] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """Every check passed."""
        return not self.problems


def check_health(settings: Settings, consumer: str | None = None, *, require_worker: bool = True) -> HealthReport:
    """Check Redis, PostgreSQL and the worker heartbeat(s).

    With ``consumer``, that worker must have a live heartbeat; otherwise a worker on this host
    (consumer names start with the host name, so inside a container that means its own worker).
    A worker whose writer cannot reach PostgreSQL counts as unhealthy.
    """
    report = HealthReport()
    urls = resolve_urls(settings)
    keys = RedisKeys.from_settings(settings)
    client = redis.Redis.from_url(urls.redis_url, decode_responses=True, socket_timeout=5)
    try:
        client.ping()
        report.redis_ok = True
        for key in client.scan_iter(match=keys.worker_pattern, count=1000):
            beat = client.hgetall(key)
            if beat:
                down = beat.get("postgres_down_since") or ""
                report.workers.append(
                    WorkerBeat(
                        name=key.removeprefix(keys.worker("")),
                        in_flight=int(beat.get("in_flight", 0)),
                        written=int(beat.get("written", 0)),
                        reclaimed=int(beat.get("reclaimed", 0)),
                        postgres_down_since=float(down) if down else None,
                    )
                )
    except redis.RedisError as exc:
        report.problems.append(f"Redis at {redact_url(urls.redis_url)} is unreachable: {exc}")
    finally:
        client.close()
    try:
        run_sync(ping(urls.database_url, connect_timeout_s=5))
        report.postgres_ok = True
    except Exception as exc:  # any failure here means "not healthy", with the reason
        report.problems.append(f"PostgreSQL at {redact_url(urls.database_url)} is not usable: {exc}".strip())
    if report.redis_ok and require_worker:
        _check_workers(report, consumer)
    return report


def _check_workers(report: HealthReport, consumer: str | None) -> None:
    if consumer is not None:
        mine = [w for w in report.workers if w.name == consumer]
        wanted = f"worker {consumer}"
    else:
        host = socket.gethostname()
        mine = [w for w in report.workers if w.name.startswith(f"{host}-")]
        wanted = f"a worker on host {host}"
    if not mine:
        report.problems.append(f"no live heartbeat from {wanted} (is `dragoman worker` running?)")
    for worker in mine:
        if worker.postgres_down_since is not None:
            report.problems.append(
                f"worker {worker.name} cannot write to PostgreSQL for {time.time() - worker.postgres_down_since:.0f}s"
            )
