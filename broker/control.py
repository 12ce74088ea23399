"""The control channel: CANCEL publishes ``cancel <job id>`` there for a running job; workers follow it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.keys import RedisKeys


class CancelRequests:
    """One subscription to the control channel, yielding the ids of jobs whose cancel was requested.

    :meth:`connect` first (it raises if Redis is away), then iterate :meth:`job_ids` until the
    connection is lost (a redis-py connection error); :meth:`close` always. A cancel published
    while nobody was subscribed is missed.
    """

    def __init__(self, redis: aioredis.Redis, keys: RedisKeys) -> None:
        self._channel = keys.control_channel
        self._pubsub = redis.pubsub(ignore_subscribe_messages=True)

    async def connect(self) -> None:
        """Subscribe to the channel (cancels published from now on arrive)."""
        await self._pubsub.subscribe(self._channel)

    async def job_ids(self) -> AsyncIterator[str]:
        """The id of each job a cancel is requested for, as the messages arrive."""
        async for message in self._pubsub.listen():
            command, _, job_id = str(message.get("data", "")).partition(" ")
            if command == "cancel" and job_id:
                yield job_id

    async def close(self) -> None:
        """Close the subscription's connection (quietly if it is already lost)."""
        with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
            await self._pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed since redis-py 8.2
