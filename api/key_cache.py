"""API keys looked up once per half minute per server, not once per request, yet revoked at once.

A request's key is found by its SHA-256 in PostgreSQL; the answer is kept for
:data:`CACHE_SECONDS`. Revoking a key (``dragoman api-key revoke``) writes a marker to Redis that
lives longer than any cached entry, and every request checks the marker in the same round trip
as its rate-limit count (:class:`api.ratelimit.RateLimiter`), so a revoked key is refused by
every server from the next request on. Unknown keys are not cached: each try is looked up.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.revocations import mark_revoked
from storage import ApiKey, ApiKeyStore, hash_api_key

CACHE_SECONDS = 30.0
MAX_ENTRIES = 10_000
REVOCATION_MARKER_SECONDS = int(CACHE_SECONDS * 4)
"""How long a revocation marker lives: past it, no server holds the key any more."""


class ApiKeyCache:
    """The keys this server has seen lately, in front of :class:`~storage.ApiKeyStore`."""

    def __init__(self, store: ApiKeyStore) -> None:
        self._store = store
        self._entries: dict[str, tuple[float, ApiKey]] = {}

    async def find(self, token: str) -> ApiKey | None:
        """The active key ``token`` is, or ``None``; from the cache while it is fresh."""
        digest = hash_api_key(token)
        now = time.monotonic()
        cached = self._entries.get(digest)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        found = await self._store.find(token)
        self._entries.pop(digest, None)
        if found is not None:
            if len(self._entries) >= MAX_ENTRIES:
                del self._entries[next(iter(self._entries))]  # the oldest entry
            self._entries[digest] = (now, found)
        return found

    def forget(self, token: str) -> None:
        """Drop ``token``'s entry (its key was found revoked)."""
        self._entries.pop(hash_api_key(token), None)


async def announce_revocation(client: aioredis.Redis, keys: RedisKeys, api_key_id: str) -> None:
    """Tell every API server that ``api_key_id`` is revoked (after it is revoked in PostgreSQL)."""
    await mark_revoked(client, keys, api_key_id, REVOCATION_MARKER_SECONDS)
