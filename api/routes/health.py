"""``/healthz`` (the process answers) and ``/readyz`` (it can reach Redis and PostgreSQL); no key needed."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Depends

from api.errors import ApiError
from api.schemas import ErrorBody, Health
from api.services import ApiServices, services
from broker.redis_client import ping

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)
READY_TIMEOUT_SECONDS = 3.0


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: 200 while the server's event loop answers (touches neither Redis nor PostgreSQL)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": ErrorBody}})
async def readyz(api: Annotated[ApiServices, Depends(services)]) -> Health:
    """Readiness: 200 when Redis answers ``PING`` and PostgreSQL its ``jobs`` table within 3 s, else 503.

    A load balancer sends no requests to a server that cannot reach its services. PostgreSQL is
    asked on one session kept for the probes (not one per call, nor one of the requests' pools:
    a busy pool is load, not unreadiness).
    """
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await ping(api.client.redis)
            await api.readiness.check_database()
    except Exception as exc:  # any failure to answer in time means "not ready"
        # The details (host names, driver messages) go to the log, not to callers without a key.
        log.warning("not ready: %s: %s", type(exc).__name__, exc)
        raise ApiError(503, "not_ready", "Redis or PostgreSQL does not answer; see the server's log") from None
    return Health(status="ready")
