"""What every request handler shares: the settings, one asyncio client, the stores, the limiter."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from api.event_feed import EventFeed
from api.key_cache import ApiKeyCache
from api.ratelimit import RateLimiter
from contract.settings import Settings
from producer import AsyncClient
from storage import FileStore
from tenancy.batches import BatchService
from tenancy.queued_limit import QueuedJobLimit
from tenancy.tenant_groups import TenantGroups


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


async def services(request: Request) -> ApiServices:
    """The application's :class:`ApiServices` (a FastAPI dependency).

    ``async`` although it awaits nothing: FastAPI runs a plain function dependency in a thread
    pool, and that hop cost more than the rest of a one-job request's dependencies together.
    """
    found: ApiServices = request.app.state.services
    return found
