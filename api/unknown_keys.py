"""Tries with API keys that are not valid, counted per client address: past the limit, 429 with no key looked up.

A request's key is looked up in PostgreSQL unless this server holds it already (:mod:`api.key_cache`).
A client sending a new made-up key with every request (no key needed for that) would cost a
PostgreSQL lookup each, and slowed every tenant's requests 11 to 50 times (issue 48). So each address's
tries with keys that are unknown or revoked are counted in Redis, in fixed windows of
a minute shared by every API server (``broker/rate_windows.py``), and past
``DRAGOMAN_API_UNKNOWN_KEY_LIMIT_PER_MINUTE`` the address is answered ``429 too_many_invalid_keys``
with ``Retry-After`` until the window ends, for any key this server does not hold already: nothing is
looked up. The server remembers an address it refused until then, so a flood costs not even a
Redis round trip per request. A valid key this server holds passes as before, from any address, and
other addresses are not counted at all.

**The address.** The connection's peer, as uvicorn gives it: behind a proxy, the client's address
from ``X-Forwarded-For`` if the proxy is one uvicorn trusts (``FORWARDED_ALLOW_IPS``, 127.0.0.1 by
default), else the proxy's own, which every client behind it would then share. An IPv6 address
counts as its /64 network: one host is usually handed a whole /64, and could otherwise take a fresh
address for every try.
"""

from __future__ import annotations

import ipaddress
import math
import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.rate_windows import count_unknown_key, unknown_key_count

WINDOW_SECONDS = 60
MAX_REMEMBERED = 10_000
"""Refused addresses one server remembers at once (the oldest is forgotten first: Redis still counts it)."""


@dataclass(frozen=True, slots=True)
class AddressDecision:
    """Whether an address may still have a key looked up; if not, the seconds until its window ends."""

    allowed: bool
    retry_after: int = 0
    tries: int = 0


def address_bucket(host: str | None) -> str:
    """What one client is counted as: its IPv4 address, its IPv6 /64 network, or the host as given."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address.ipv4_mapped or address) if isinstance(address, ipaddress.IPv6Address) else str(address)


class UnknownKeyLimiter:
    """Counts each client address's tries with keys that are not valid (see the module's docstring)."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys, limit_per_minute: int) -> None:
        self._redis = redis_client
        self._keys = keys
        self.limit_per_minute = limit_per_minute
        self._refused_until: dict[str, float] = {}  # address -> the end of the window it was refused in (epoch s)

    async def check(self, address: str, now: float | None = None) -> AddressDecision:
        """Whether ``address`` may have a key looked up now: not if its tries this window reached the limit."""
        now = time.time() if now is None else now
        remembered = self._remembered(address, now)
        if remembered is not None:
            return remembered
        window = int(now // WINDOW_SECONDS)
        tries = await unknown_key_count(self._redis, self._keys, address, window)
        if tries < self.limit_per_minute:
            return AddressDecision(True, tries=tries)
        return self._refuse(address, window, now, tries)

    async def note_unknown(self, address: str, now: float | None = None) -> AddressDecision:
        """Count one try of ``address`` with a key that is not valid; refused once the window holds more than
        the limit."""
        now = time.time() if now is None else now
        remembered = self._remembered(address, now)
        if remembered is not None:
            return remembered  # refused already: counted no further, the window's end is known
        window = int(now // WINDOW_SECONDS)
        tries = await count_unknown_key(self._redis, self._keys, address, window, WINDOW_SECONDS)
        if tries <= self.limit_per_minute:
            return AddressDecision(True, tries=tries)
        return self._refuse(address, window, now, tries)

    def _remembered(self, address: str, now: float) -> AddressDecision | None:
        """The refusal this server remembers for ``address`` while its window lasts, or ``None``."""
        until = self._refused_until.get(address)
        if until is None:
            return None
        if now >= until:
            del self._refused_until[address]
            return None
        return AddressDecision(False, max(1, math.ceil(until - now)), self.limit_per_minute)

    def _refuse(self, address: str, window: int, now: float, tries: int) -> AddressDecision:
        """Remember ``address`` as refused until ``window`` ends; the refusal."""
        until = float((window + 1) * WINDOW_SECONDS)
        if address not in self._refused_until and len(self._refused_until) >= MAX_REMEMBERED:
            del self._refused_until[next(iter(self._refused_until))]
        self._refused_until[address] = until
        return AddressDecision(False, max(1, math.ceil(until - now)), tries)
