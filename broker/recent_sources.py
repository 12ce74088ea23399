"""A tenant's recent source languages (untagged list keys): what its short texts sent without a language are likely in.

The API records the language of each request it was sure of (the request's texts together), newest first, keeping
the last few; the DeepL and LibreTranslate doors read them back as source hints (``api/source_hints.py``). A list
of a tenant's last ``keep`` languages, not a counter per language: the hints follow what a key sends now.
"""

from __future__ import annotations

from collections import Counter

import redis.asyncio as aioredis

from broker.keys import RedisKeys

RECENT_SOURCES_TTL_S = 30 * 24 * 3600
"""A tenant's list goes 30 days after its last recorded request."""


async def recent_sources(
    redis: aioredis.Redis, keys: RedisKeys, tenant: str, *, limit: int, keep: int, record: str | None = None
) -> list[str]:
    """``tenant``'s most frequent languages among its last ``keep`` recorded requests (at most ``limit``, the more
    frequent first and, between equals, the more recent), read before ``record`` (this request's language, if the
    detector was sure of it) is pushed: one MULTI/EXEC on one key (read; push, trim to ``keep``, 30 days' expiry),
    so the list never grows past ``keep`` nor lives without its expiry."""
    key = keys.recent_sources(tenant)
    async with redis.pipeline(transaction=record is not None) as pipe:
        pipe.lrange(key, 0, keep - 1)
        if record is not None:
            pipe.lpush(key, record)
            pipe.ltrim(key, 0, keep - 1)
            pipe.expire(key, RECENT_SOURCES_TTL_S)
        values = (await pipe.execute())[0]
    languages = [value.decode() if isinstance(value, bytes) else str(value) for value in values]
    counts = Counter(languages)
    newest: dict[str, int] = {}
    for index, language in enumerate(languages):  # index 0 is the newest request
        newest.setdefault(language, index)
    return sorted(counts, key=lambda language: (-counts[language], newest[language]))[:limit]
