"""``Authorization: Bearer <key>`` on every route but health: the key names its tenant, and is rate limited.

Keys that are not valid are limited too, per client address (:mod:`api.unknown_keys`): past the limit an
address's next unknown key is refused ``429 too_many_invalid_keys`` without being looked up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, NoReturn

from fastapi import Depends, Request

from api.errors import ApiError
from api.services import ApiServices, services
from api.unknown_keys import address_bucket
from storage import ApiKey

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
    return await caller_for_key(api, token, client_address(request))


def client_address(request: Request) -> str:
    """What the request's client is counted as by the limit on keys that are not valid (:mod:`api.unknown_keys`)."""
    return address_bucket(request.client.host if request.client else None)


async def caller_for_key(api: ApiServices, token: str, address: str) -> Caller:
    """The :class:`Caller` an API key's secret names, however the request carried it; 401 / 429 as ``ApiError``.

    Every door (native Bearer, DeepL's ``DeepL-Auth-Key``, LibreTranslate's ``api_key`` field) ends
    here, so a key is checked, rate limited and revoked the same way whichever protocol it came by.
    The key is looked up by its SHA-256 (kept for half a minute, :mod:`api.key_cache`); a revoked
    key is refused at once by every server, through the marker its revocation leaves in Redis. A key
    this server does not hold is looked up only while ``address`` (:func:`client_address`) is under
    its limit of keys that are not valid: past it, ``429 too_many_invalid_keys``, nothing looked up.
    """
    key = api.api_keys.cached(token)
    if key is None:
        key = await _look_up(api, token, address)
    limit = key.rate_limit_per_minute or api.settings.api_rate_limit_per_minute
    decision = await api.limiter.hit(key.id, limit)
    if decision.revoked:
        api.api_keys.forget(token)
        await _refuse_unknown(api, address)
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


async def _look_up(api: ApiServices, token: str, address: str) -> ApiKey:
    """The active key ``token`` is, looked up (once per few seconds for a key found not valid) while ``address`` may."""
    if not api.api_keys.known_unknown(token):
        allowed = await api.unknown_keys.check(address)
        if not allowed.allowed:
            raise _too_many_invalid_keys(api, allowed.retry_after)
        found = await api.api_keys.find(token)
        if found is not None:
            return found
    await _refuse_unknown(api, address)


async def _refuse_unknown(api: ApiServices, address: str) -> NoReturn:
    """Count a key that is not valid against ``address``: ``401 invalid_api_key``, or 429 once past its limit."""
    decision = await api.unknown_keys.note_unknown(address)
    if not decision.allowed:
        raise _too_many_invalid_keys(api, decision.retry_after)
    raise ApiError(401, "invalid_api_key", "this API key is not valid (unknown or revoked)", _CHALLENGE)


def _too_many_invalid_keys(api: ApiServices, retry_after: int) -> ApiError:
    limit = api.unknown_keys.limit_per_minute
    return ApiError(
        429,
        "too_many_invalid_keys",
        f"this address sent more than {limit} API keys that are not valid within a minute "
        f"(DRAGOMAN_API_UNKNOWN_KEY_LIMIT_PER_MINUTE); no key it sends is looked up for {retry_after}s",
        {"Retry-After": str(retry_after)},
    )


CallerDep = Annotated[Caller, Depends(authenticate)]
"""A route parameter of this type requires a valid key."""
