"""Waking the callers of ``wait`` when one of their jobs' completion events arrives, instead of at their next poll.

A caller watches a set of jobs (one, or a request's thousand) with one watch: one event to wait on and
the ids whose completion was published since it last looked, so it reads only those. One subscription
to the events channel per client, held only while somebody waits (and a few seconds after, so a burst
of ``?wait=`` requests does not subscribe and unsubscribe each time).
An event only wakes a caller, who then reads the job's status: a message missed while the
subscription was down costs at most the caller's safety poll, never a wrong answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from broker.finish_notices import FinishNotices
from broker.keys import RedisKeys
from contract.backoff import Backoff
from producer.bounded_wait import wait_at_most

log = logging.getLogger(__name__)

IDLE_SECONDS = 5.0
"""How long the subscription stays once nobody waits."""


class FinishWatch:
    """One caller's watch over a set of jobs: woken when any of them is published as finished.

    :meth:`wait` returns once an event came since the last :meth:`take`; :meth:`take` hands over the
    ids published since (and re-arms the wait). Taking before a status read means an event published
    after the read wakes the next wait.
    """

    def __init__(self) -> None:
        self._woken = asyncio.Event()
        self._published: set[str] = set()

    def notice(self, job_id: str) -> None:
        """Record ``job_id``'s completion event and wake the caller (the listener calls it)."""
        self._published.add(job_id)
        self._woken.set()

    def take(self) -> set[str]:
        """The ids published since the last take, forgotten here; the next :meth:`wait` waits for a new one."""
        self._woken.clear()
        published, self._published = self._published, set()
        return published

    async def wait_at_most(self, seconds: float) -> bool:
        """Until a watched job's completion is published (at once if one was since the last :meth:`take`),
        at most ``seconds``; whether one was."""
        return await wait_at_most(self._woken, seconds)


class FinishWaiter:
    """Watches (:class:`FinishWatch`) noticed when a watched job's completion event is published.

    Owned by :class:`~producer.AsyncClient`, which closes it; the listening task is started by
    the first :meth:`watch` and ends by itself once nobody has waited for :data:`IDLE_SECONDS`.
    """

    def __init__(self, redis: aioredis.Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self._keys = keys
        self._watchers: dict[str, set[FinishWatch]] = {}
        self._subscribed = asyncio.Event()
        self._attempted = asyncio.Event()  # the listener has tried to subscribe, and succeeded or not
        self._task: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        """Whether completion events are being received now (otherwise callers poll)."""
        return self._subscribed.is_set()

    @contextlib.asynccontextmanager
    async def watch(self, job_ids: Iterable[str], ready_within: float) -> AsyncIterator[FinishWatch]:
        """A watch noticed when any of ``job_ids``' completions is published, for the duration of the block.

        One watch for the whole set (a request's thousand jobs cost one watch, not a thousand). Waits up
        to ``ready_within`` seconds for a new listener's first try to subscribe, so that a status read
        inside the block cannot miss an event published after it; a listener that could not subscribe
        costs the caller no wait (it polls).
        """
        watch = FinishWatch()
        watched = set(job_ids)
        for job_id in watched:
            self._watchers.setdefault(job_id, set()).add(watch)
        if self._task is None or self._task.done():
            self._attempted.clear()
            self._task = asyncio.create_task(self._listen(), name="dragoman-finish-waiter")
        try:
            await wait_at_most(self._attempted, ready_within)
            yield watch
        finally:
            for job_id in watched:
                watches = self._watchers.get(job_id)
                if watches is not None:
                    watches.discard(watch)
                    if not watches:
                        del self._watchers[job_id]

    async def close(self) -> None:
        """Stop listening (the waiting callers fall back to polling)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while self._watchers:  # checked again after each subscription: a watcher may come while one closes
            notices = FinishNotices(self._redis, self._keys)
            lost = False
            try:
                await notices.connect()
                self._subscribed.set()
                self._attempted.set()
                backoff.reset()
                await self._wake_until_idle(notices)
            except (RedisError, OSError) as exc:
                log.warning("completion events unavailable (%s); waiting callers poll", exc)
                self._attempted.set()
                lost = True
            finally:
                self._subscribed.clear()
                await notices.close()
            if lost:
                await asyncio.sleep(backoff.next_delay())

    async def _wake_until_idle(self, notices: FinishNotices) -> None:
        loop = asyncio.get_running_loop()
        idle_since: float | None = None
        while True:
            job_id = await notices.next_job_id(timeout=0.5)
            if job_id is not None:
                for watch in self._watchers.get(job_id, ()):
                    watch.notice(job_id)
            if self._watchers:
                idle_since = None
            elif idle_since is None:
                idle_since = loop.time()
            elif loop.time() - idle_since >= IDLE_SECONDS:
                return
