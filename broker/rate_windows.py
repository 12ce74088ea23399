"""Per-key request counters in fixed windows (untagged keys: no script touches them), shared by every API server.

On Redis Cluster the one MULTI/EXEC below cannot stand as it is: it reads the tenant's
unfinished-jobs set (tagged, the jobs' slot) beside the window and the revocation marker
(untagged, elsewhere). The sharding work (issue 37) has to split it by slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from broker.keys import RedisKeys


@dataclass(frozen=True, slots=True)
class WindowCount:
    """One request counted: the window's count so far, whether the key is revoked, the tenant's unfinished jobs."""

    count: int
    revoked: bool
    tenant_queued: int | None


async def count_request(
    redis: aioredis.Redis, keys: RedisKeys, api_key_id: str, window: int, window_s: int, tenant: str | None
) -> WindowCount:
    """Count one request of ``api_key_id`` in ``window`` (lasting ``window_s``), read the key's revocation marker
    and, given ``tenant``, its unfinished-job count: one MULTI/EXEC round trip."""
    key = keys.rate_window(api_key_id, window)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.incr(key)
        # Refreshed on every hit (EXPIRE NX needs Redis 7; the embedded server is 6.2): the
        # window's key is never used after the window, so it goes at most a window later.
        pipe.expire(key, window_s + 1)
        pipe.exists(keys.revoked_api_key(api_key_id))
        if tenant is not None:
            pipe.zcard(keys.tenant_queued(tenant))
        count, _, revoked, *queued = await pipe.execute()
    return WindowCount(int(count), bool(revoked), int(queued[0]) if queued else None)
