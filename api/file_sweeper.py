"""The API's file sweeper: deletes expired files (and their bytes) every sweep interval.

An expired file answers 404 from the moment it expires (every lookup filters on ``expires_at``);
the sweep frees its storage. Every API server runs one: the delete is one idempotent statement,
so several servers sweeping at once delete each file once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from storage import FileStore

log = logging.getLogger(__name__)


class FileSweeper:
    """One task, owned by the application's lifespan: :meth:`start` at start-up, :meth:`close` at shutdown."""

    def __init__(self, files: FileStore, interval_seconds: float) -> None:
        self._files = files
        self._interval = interval_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin sweeping in the background, every interval (the first one interval from now)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="dragoman-file-sweeper")

    async def sweep_once(self) -> int:
        """Delete what has expired now; how many files went."""
        swept = await self._files.sweep()
        if swept:
            log.info("file sweeper: deleted %d expired or abandoned files", swept)
        return swept

    async def _run(self) -> None:
        while True:
            # An interval first: start-up takes no connection for it (expired files are 404 already).
            await asyncio.sleep(self._interval)
            try:
                await self.sweep_once()
            except Exception as exc:  # the database may be down for a while: sweep again later
                log.warning("file sweeper: sweep failed, retrying in %gs: %s", self._interval, exc)

    async def close(self) -> None:
        """Stop sweeping and wait for the task to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
