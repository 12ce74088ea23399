"""Unguessable, expiring names for translated files: LibreTranslate's ``translatedFileUrl`` is fetched as a link.

LibreTranslate's web page and its clients download the translated file from the URL ``/translate_file``
answered, as a plain link, without the key. The name in that URL is a random token (192 bits) that
names one tenant's document for ``ttl_s`` seconds; nothing else about the document (its id, which other
routes show) opens it without the key.
"""

from __future__ import annotations

import secrets

import redis.asyncio as aioredis

from broker.keys import RedisKeys


class DownloadLinks:
    """Issues and resolves the tokens; the Redis client is its caller's (the API's)."""

    def __init__(self, client: aioredis.Redis, keys: RedisKeys, ttl_s: int) -> None:
        self._client = client
        self._keys = keys
        self.ttl_s = ttl_s

    async def issue(self, tenant: str, document_id: str) -> str:
        """A new token naming ``tenant``'s document ``document_id`` for ``ttl_s`` seconds."""
        token = secrets.token_urlsafe(24)
        await self._client.set(self._keys.download_link(token), f"{tenant}\n{document_id}", ex=self.ttl_s)
        return token

    async def resolve(self, token: str) -> tuple[str, str] | None:
        """The tenant and document id ``token`` names, or None (unknown or expired)."""
        if not token or len(token) > 64:
            return None
        value = await self._client.get(self._keys.download_link(token))
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        tenant, _, document_id = text.partition("\n")
        return (tenant, document_id) if document_id else None
