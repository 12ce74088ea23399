"""What every request handler shares: the settings, one asyncio client, the stores, the limiter."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi import Request

from api.cpu_work import CpuWork
from api.event_feed import EventFeed
from api.joined_requests import JoinedRequests
from api.key_cache import ApiKeyCache
from api.ratelimit import RateLimiter
from api.unknown_keys import UnknownKeyLimiter
from broker.queued_limit import QueuedJobLimit
from contract.settings import Settings
from producer import AsyncClient
from storage import FileStore, ReadinessProbe
from tenancy.batches import BatchService
from tenancy.tenant_groups import TenantGroups


class Readiness:
    """``/readyz``'s PostgreSQL check: one kept session for every probe, one check at a time.

    A connection per probe cost the database a session (and a connect) per call; a load
    balancer probing every server every second, or a burst of probes, added up. Checks are
    serialised so that concurrent probes never open a second session beside the kept one.
    """

    def __init__(self, database_url: str) -> None:
        self._probe = ReadinessProbe(database_url, read_jobs=True)
        self._lock = asyncio.Lock()

    async def check_database(self) -> None:
        """Raise ``DatabaseUnavailableError`` saying why if PostgreSQL does not answer on the kept session."""
        async with self._lock:
            await self._probe.check()

    async def close(self) -> None:
        """Close the kept session (the application's shutdown)."""
        async with self._lock:
            await self._probe.close()


@dataclass(frozen=True, slots=True)
class ApiServices:
    """Owned by the application's lifespan: opened at start-up, closed at shutdown."""

    settings: Settings
    client: AsyncClient
    api_keys: ApiKeyCache
    limiter: RateLimiter
    files: FileStore
    batches: BatchService
    groups: TenantGroups
    events: EventFeed
    queued: QueuedJobLimit
    readiness: Readiness
    work: CpuWork  # per-request work that grows with the body (tagging, glossaries), off the event loop
    joined: JoinedRequests  # the doors' requests in flight, joined by identical retries
    unknown_keys: UnknownKeyLimiter  # each client address's tries with keys that are not valid


async def services(request: Request) -> ApiServices:
    """The application's :class:`ApiServices` (a FastAPI dependency).

    ``async`` although it awaits nothing: FastAPI runs a plain function dependency in a thread
    pool, and that hop cost more than the rest of a one-job request's dependencies together.
    """
    found: ApiServices = request.app.state.services
    return found
