"""The events channel as a feed of finished job ids: what a waiting caller listens to.

FINISH publishes each completion event's JSON on the events channel (Pub/Sub) once the job's row
is committed. A message published while nobody was subscribed is missed, so a listener never
relies on it alone: it only wakes a caller that then reads the job's status.
"""

from __future__ import annotations

import contextlib

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.keys import RedisKeys


class _EventId(msgspec.Struct):
    job_id: str


_decode_id = msgspec.json.Decoder(_EventId).decode


class FinishNotices:
    """One subscription to the events channel, yielding the id of each job whose final row was committed.

    :meth:`connect` first (it raises if Redis is away), then ask :meth:`next_job_id` until the
    connection is lost (a redis-py connection error); :meth:`close` always.
    """

    def __init__(self, redis: aioredis.Redis, keys: RedisKeys) -> None:
        self._channel = keys.events_channel
        self._pubsub = redis.pubsub(ignore_subscribe_messages=True)

    async def connect(self) -> None:
        """Subscribe to the channel (events published from now on arrive)."""
        await self._pubsub.subscribe(self._channel)

    async def next_job_id(self, timeout: float) -> str | None:  # noqa: ASYNC109 (redis-py's own timeout)
        """The next finished job's id, or None if no event came within ``timeout`` seconds.

        Raises redis-py's connection errors when the subscription is lost.
        """
        message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
        if message is None:
            return None
        try:
            return _decode_id(message.get("data", "")).job_id
        except (msgspec.DecodeError, TypeError):
            return None  # not an event: nothing to wake

    async def close(self) -> None:
        """Close the subscription's connection (quietly if it is already lost)."""
        with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
            await self._pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed since redis-py 8.2
