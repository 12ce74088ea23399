"""Markers of just-revoked API keys (untagged keys): every API server refuses a key it still holds in its cache."""

from __future__ import annotations

import redis.asyncio as aioredis

from broker.keys import RedisKeys


async def mark_revoked(client: aioredis.Redis, keys: RedisKeys, api_key_id: str, ttl_s: int) -> None:
    """Write ``api_key_id``'s revocation marker, kept ``ttl_s`` (longer than any server caches a key)."""
    await client.set(keys.revoked_api_key(api_key_id), "1", ex=ttl_s)


async def is_revoked(redis_client: aioredis.Redis, keys: RedisKeys, api_key_id: str) -> bool:
    """Whether ``api_key_id``'s revocation marker is there."""
    return bool(await redis_client.exists(keys.revoked_api_key(api_key_id)))
