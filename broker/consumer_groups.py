"""Creating a Redis consumer group, once, whoever asks first (the worker's jobs, the orchestrator's completions).

``XGROUP CREATE <stream> <group> 0 MKSTREAM`` makes the stream if it is missing and has the group
read it from the start; a ``BUSYGROUP`` answer means the group is already there, which is fine.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from contract.errors import ConfigurationError


class StreamKeyConflictError(ConfigurationError):
    """The key a stream should live at holds another kind of value, so no consumer group can be made on it."""


async def ensure_group(client: aioredis.Redis, stream: str, group: str) -> bool:
    """Create ``group`` on ``stream`` (and the stream) reading from its start; ``False`` if it existed.

    Raises :class:`StreamKeyConflictError` if ``stream`` names a key that is not a stream. The one
    implementation: the orchestrator's synchronous dispatcher runs it through ``contract/sync_bridge.py``.
    """
    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if _exists(exc):
            return False
        if _wrong_type(exc):
            raise _conflict(stream, group, await client.type(stream)) from exc
        raise
    return True


def _exists(exc: ResponseError) -> bool:
    return "BUSYGROUP" in str(exc)


def _wrong_type(exc: ResponseError) -> bool:
    return "WRONGTYPE" in str(exc)


def _conflict(stream: str, group: str, kind: Any) -> StreamKeyConflictError:
    held = kind.decode() if isinstance(kind, bytes) else str(kind)
    return StreamKeyConflictError(
        f"Redis key {stream!r} holds a {held}, not a stream, so consumer group {group!r} cannot be created; "
        "another program uses this name: delete the key, or give dragoman names of its own (DRAGOMAN_KEY_PREFIX)"
    )
