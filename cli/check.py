"""``dragoman check``: is this deployment able to work? For container health checks and operators."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field

import redis

from broker.heartbeats import read_heartbeats
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from broker.redis_health import check_redis
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
    redis_layout: str = ""  # a cluster's or a sharded deployment's: "cluster of 3 primaries, 3 shards"
    postgres_ok: bool = False
    workers: list[WorkerBeat] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """Every check passed."""
        return not self.problems


def check_health(settings: Settings, consumer: str | None = None, *, require_worker: bool = True) -> HealthReport:
    """Check Redis (on a cluster: every primary, see ``broker.redis_health``), PostgreSQL and the worker heartbeat(s).

    With ``consumer``, that worker must have a live heartbeat; otherwise a worker on this host
    (consumer names start with the host name, so inside a container that means its own worker).
    A worker whose writer cannot reach PostgreSQL counts as unhealthy.
    """
    report = HealthReport()
    urls = resolve_urls(settings)
    keys = RedisKeys.from_settings(settings)
    try:
        asyncio.run(_read_redis(report, urls.redis_url, keys))
    except redis.RedisError as exc:
        report.problems.append(f"Redis at {redact_url(urls.redis_url)} is unreachable: {exc}")
    try:
        run_sync(ping(urls.database_url, connect_timeout_s=5))
        report.postgres_ok = True
    except Exception as exc:  # any failure here means "not healthy", with the reason
        report.problems.append(f"PostgreSQL at {redact_url(urls.database_url)} is not usable: {exc}".strip())
    if report.redis_ok and require_worker:
        _check_workers(report, consumer)
    return report


async def _read_redis(report: HealthReport, redis_url: str, keys: RedisKeys) -> None:
    """Check Redis (``report.redis_ok``), then read every worker's heartbeat into ``report.workers``."""
    client = open_redis(redis_url, socket_timeout=5)
    try:
        health = await check_redis(client, keys)
        report.redis_layout = health.layout
        report.problems += [f"Redis Cluster at {redact_url(redis_url)}: {problem}" for problem in health.problems]
        report.redis_ok = health.ok
        if not health.ok:
            return  # a primary is down or the cluster failed: reading heartbeats (on every node) would only fail too
        beats = await read_heartbeats(client, keys)
    finally:
        await client.aclose()
    for name, beat in sorted(beats.items()):
        down = beat.get("postgres_down_since") or ""
        report.workers.append(
            WorkerBeat(
                name=name,
                in_flight=int(beat.get("in_flight", 0)),
                written=int(beat.get("written", 0)),
                reclaimed=int(beat.get("reclaimed", 0)),
                postgres_down_since=float(down) if down else None,
            )
        )


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
