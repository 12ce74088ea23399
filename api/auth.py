"""``Authorization: Bearer <key>`` on every route but health: the key names its tenant, and is rate limited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from api.errors import ApiError
from api.services import ApiServices, services

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made a request: the API key's id, the tenant whose jobs it sees, and its queued-job limit
    (admitted by :class:`~broker.queued_limit.QueuedJobLimit`, which counts and reserves in one atomic step)."""

    key_id: str
    tenant: str
    max_queued_jobs: int


async def authenticate(request: Request, api: Annotated[ApiServices, Depends(services)]) -> Caller:
    """The request's :class:`Caller` from ``Authorization: Bearer <key>``; 401 without a valid key, 429 past rate."""
    header = request.headers.get("authorization")
    if not header:
        raise ApiError(401, "missing_api_key", "send an API key: `Authorization: Bearer <key>`", _CHALLENGE)
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "invalid_api_key", "the Authorization header must be `Bearer <key>`", _CHALLENGE)
    return await caller_for_key(api, token)


async def caller_for_key(api: ApiServices, token: str) -> Caller:
    """The :class:`Caller` an API key's secret names, however the request carried it; 401 / 429 as ``ApiError``.

    Every door (native Bearer, DeepL's ``DeepL-Auth-Key``, LibreTranslate's ``api_key`` field) ends
    here, so a key is checked, rate limited and revoked the same way whichever protocol it came by.
    The key is looked up by its SHA-256 (kept for half a minute, :mod:`api.key_cache`); a revoked
    key is refused at once by every server, through the marker its revocation leaves in Redis.
    """
    key = await api.api_keys.find(token)
    if key is None:
        raise ApiError(401, "invalid_api_key", "this API key is not valid (unknown or revoked)", _CHALLENGE)
    limit = key.rate_limit_per_minute or api.settings.api_rate_limit_per_minute
    decision = await api.limiter.hit(key.id, limit)
    if decision.revoked:
        api.api_keys.forget(token)
        raise ApiError(401, "invalid_api_key", "this API key is not valid (unknown or revoked)", _CHALLENGE)
    if not decision.allowed:
        raise ApiError(
            429,
            "rate_limited",
            f"this API key may make {limit} requests per minute; retry in {decision.retry_after}s",
            {"Retry-After": str(decision.retry_after)},
        )
    api.client.submitter.note_tenant_weight(key.tenant, key.weight)  # fair share: its turn in the lanes
    return Caller(
        key_id=key.id,
        tenant=key.tenant,
        max_queued_jobs=key.max_queued_jobs or api.settings.api_max_queued_jobs,
    )


CallerDep = Annotated[Caller, Depends(authenticate)]
"""A route parameter of this type requires a valid key."""
