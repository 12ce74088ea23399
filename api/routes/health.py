"""``/healthz``: the process answers (no key needed, touches neither Redis nor PostgreSQL)."""

from __future__ import annotations

from fastapi import APIRouter

from api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: 200 while the server's event loop answers."""
    return Health(status="ok")
