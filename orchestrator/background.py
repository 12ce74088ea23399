"""A loop on a thread of its own that never dies quietly: the completion dispatcher and the sweeper run in one.

A background thread that dies on an exception leaves its process alive and its work undone (a
dispatcher that stopped reading completions leaves every later run ``finishing`` forever). So
:class:`BackgroundLoop` catches everything its step raises: outages of Redis or PostgreSQL are
waited out with backoff for as long as they last; any other error is logged and retried with
backoff, and after ``max_failures`` in a row the loop gives up and calls ``on_fatal`` (the
``rq-worker`` command then exits non-zero, so its supervisor restarts it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
import redis

from contract.backoff import Backoff
from storage import DatabaseUnavailableError

log = logging.getLogger(__name__)

OUTAGES: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterDownError,  # a Redis Cluster between a primary's loss and its replica's promotion
    psycopg.OperationalError,
    psycopg.InterfaceError,
    DatabaseUnavailableError,
)
"""Errors that mean a server is away for now: waited out, never counted as failures."""


class BackgroundLoop:
    """Calls ``step`` over and over on a daemon thread, ``interval`` seconds apart, until :meth:`stop`."""

    def __init__(
        self,
        name: str,
        step: Callable[[], object],
        *,
        interval: float,
        on_fatal: Callable[[BaseException], None],
        max_failures: int = 5,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = name
        self._step = step
        self._interval = interval
        self._on_fatal = on_fatal
        self._max_failures = max_failures
        self._backoff = backoff or Backoff(0.2, 10.0)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.fatal: BaseException | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the loop to end after its current step, and wait for it (at most ``timeout`` seconds)."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Whether the thread is still running."""
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # the loop gave up, or something no step should raise: tell the owner
            self.fatal = exc
            log.critical("%s cannot go on: %s: %s", self.name, type(exc).__name__, exc, exc_info=exc)
            self._on_fatal(exc)

    def _loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self._step()
            except OUTAGES as exc:
                delay = self._backoff.next_delay()
                log.warning("%s: a server is unavailable (%s); retrying in %.1fs", self.name, exc, delay)
            except Exception as exc:
                failures += 1
                if failures >= self._max_failures:
                    raise
                delay = self._backoff.next_delay()
                log.exception("%s: step failed (%d in a row): %s; retrying in %.1fs", self.name, failures, exc, delay)
            else:
                failures = 0
                self._backoff.reset()
                delay = self._interval
            if delay:
                self._stopping.wait(delay)  # an Event's wait: stop() cuts it short
