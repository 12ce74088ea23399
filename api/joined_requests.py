"""Identical door requests in flight share one piece of work: a client's retry joins it, never starts it again.

DeepL's SDK waits 10 s for an answer and sends the same request again, up to five times; Weblate gives up
after 5 s (DeepL) or 20 s (LibreTranslate) and sends it again later. Without joining, each attempt made its
jobs, the previous attempt's disconnect cancelled them, and a request slower than the client's timeout was
never answered however often it was sent. :class:`JoinedRequests` keeps each request's work by a key
(:func:`request_key`: the API key, the texts and every option) while it runs: an identical request that
arrives meanwhile waits for the same result. A client that goes away only stops waiting; the work is
cancelled once nobody has waited for it for ``grace_s`` seconds (a retry arrives within them and joins).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from contract.schemas import TranslationRequest

T = TypeVar("T")


def request_key(
    key_id: str, requests: Sequence[TranslationRequest], inline_tags: Sequence[bool], wait_s: float | None
) -> bytes:
    """What makes two door requests the same work: the API key, each text with all its options, in order.

    A digest of the whole request (its cost grows with the body: call it on the API's work threads).
    """
    encoded = msgspec.json.encode([key_id, wait_s, list(inline_tags), list(requests)])
    return hashlib.sha256(encoded).digest()


class _Shared(Generic[T]):
    """One piece of work, the requests waiting for it, and the timer that cancels it once nobody waits."""

    def __init__(self, task: asyncio.Task[T]) -> None:
        self.task = task
        self.waiters = 0
        self.reaper: asyncio.TimerHandle | None = None


class JoinedRequests:
    """The work of the door requests in flight, by :func:`request_key`; owned by the API's lifespan.

    ``grace_s``: how long work outlives its last waiting client before it is cancelled (0: at once, as
    a request without joining would).
    """

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._shared: dict[bytes, _Shared[Any]] = {}

    def __len__(self) -> int:
        """Pieces of work in flight (each with one or more requests waiting, or inside its grace period)."""
        return len(self._shared)

    async def run(self, key: bytes, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``work()``'s result, started now, or the one an identical request (same ``key``) already runs.

        If this request is cancelled (its client went away) it stops waiting; the work goes on while
        another request waits for it, or for ``grace_s`` seconds more, then it is cancelled (its own
        cancellation handling runs: a door's jobs are cancelled).
        """
        shared: _Shared[T] | None = self._shared.get(key)
        if shared is None:
            shared = _Shared(asyncio.ensure_future(work()))
            self._shared[key] = shared
            shared.task.add_done_callback(lambda _: self._forget(key, shared))
        shared.waiters += 1
        if shared.reaper is not None:
            shared.reaper.cancel()
            shared.reaper = None
        try:
            return await asyncio.shield(shared.task)
        finally:
            shared.waiters -= 1
            if shared.waiters == 0 and not shared.task.done():
                self._abandoned(shared)

    def _abandoned(self, shared: _Shared[Any]) -> None:
        """Nobody waits for ``shared`` any more: cancel it after the grace period (a retry may still join)."""
        if self.grace_s <= 0:
            shared.task.cancel()
        else:
            shared.reaper = asyncio.get_running_loop().call_later(self.grace_s, shared.task.cancel)

    def _forget(self, key: bytes, shared: _Shared[Any]) -> None:
        """Drop finished work (a later identical request is new work) and its timer."""
        if self._shared.get(key) is shared:
            del self._shared[key]
        if shared.reaper is not None:
            shared.reaper.cancel()
        if not shared.task.cancelled():
            shared.task.exception()  # retrieved: a failure nobody waited for is not "never retrieved"

    async def close(self) -> None:
        """Cancel all work still in flight and wait for its cancellation handling (at the API's shutdown)."""
        tasks = [shared.task for shared in self._shared.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
