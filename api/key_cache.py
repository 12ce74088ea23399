"""API keys looked up once per half minute per server, not once per request, yet revoked at once.

A request's key is found by its SHA-256 in PostgreSQL; the answer is kept for
:data:`CACHE_SECONDS`. Revoking a key (``dragoman api-key revoke``) writes a marker to Redis that
lives longer than any cached entry, and every request checks the marker in the same round trip
as its rate-limit count (:class:`api.ratelimit.RateLimiter`), so a revoked key is refused by
every server from the next request on. A key that is not valid (unknown, or revoked: the store
finds only active keys) is remembered too, for :data:`UNKNOWN_CACHE_SECONDS`: the same made-up key
sent again and again is looked up once, and :mod:`api.unknown_keys` limits how many different ones
one address may have looked up. A key's secret is random: a remembered unknown one cannot become
valid meanwhile.
"""

from __future__ import annotations

import time
from typing import TypeVar

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.revocations import mark_revoked
from storage import ApiKey, ApiKeyStore, hash_api_key

_T = TypeVar("_T")

CACHE_SECONDS = 30.0
MAX_ENTRIES = 10_000
UNKNOWN_CACHE_SECONDS = 10.0
MAX_UNKNOWN_ENTRIES = 10_000
REVOCATION_MARKER_SECONDS = int(CACHE_SECONDS * 4)
"""How long a revocation marker lives: past it, no server holds the key any more."""


class ApiKeyCache:
    """The keys this server has seen lately, in front of :class:`~storage.ApiKeyStore`."""

    def __init__(self, store: ApiKeyStore) -> None:
        self._store = store
        self._entries: dict[str, tuple[float, ApiKey]] = {}
        self._unknown: dict[str, float] = {}  # digest -> when it was found not valid

    def cached(self, token: str) -> ApiKey | None:
        """The key ``token`` is if this server holds it, fresh; ``None`` otherwise (nothing is looked up)."""
        entry = self._entries.get(hash_api_key(token))
        if entry is not None and time.monotonic() - entry[0] < CACHE_SECONDS:
            return entry[1]
        return None

    def known_unknown(self, token: str) -> bool:
        """Whether ``token`` was found not valid within the last :data:`UNKNOWN_CACHE_SECONDS`."""
        since = self._unknown.get(hash_api_key(token))
        return since is not None and time.monotonic() - since < UNKNOWN_CACHE_SECONDS

    async def find(self, token: str) -> ApiKey | None:
        """The active key ``token`` is, or ``None``; from the cache while it is fresh, either way."""
        digest = hash_api_key(token)
        now = time.monotonic()
        cached = self._entries.get(digest)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        if self.known_unknown(token):
            return None
        found = await self._store.find(token)
        self._entries.pop(digest, None)
        self._unknown.pop(digest, None)
        if found is not None:
            _keep(self._entries, digest, (now, found), MAX_ENTRIES)
        else:
            _keep(self._unknown, digest, now, MAX_UNKNOWN_ENTRIES)
        return found

    def forget(self, token: str) -> None:
        """Drop ``token``'s entry (its key was found revoked)."""
        self._entries.pop(hash_api_key(token), None)


def _keep(entries: dict[str, _T], digest: str, value: _T, most: int) -> None:
    """Put ``value`` in ``entries`` under ``digest``, dropping the oldest entry first when ``most`` are held."""
    if len(entries) >= most:
        del entries[next(iter(entries))]  # the oldest entry
    entries[digest] = value


async def announce_revocation(client: aioredis.Redis, keys: RedisKeys, api_key_id: str) -> None:
    """Tell every API server that ``api_key_id`` is revoked (after it is revoked in PostgreSQL)."""
    await mark_revoked(client, keys, api_key_id, REVOCATION_MARKER_SECONDS)
