"""The quality checks off the worker's event loop: batched calls into child processes.

The checks cost about 0.3 ms of CPU per job (the language detector most of it). Run inline they
would take that from the worker's one event-loop core, the core that feeds the engine. Here each
:meth:`QualityCheckPool.check` joins a pending batch; the batch goes to the child processes in one
executor call when it is full or at the end of the current loop iteration. The children are
*spawned* (the worker holds vLLM's threads: it is never forked) and load the detector at start.

A child that dies or a check that raises never fails a job: its flags are ``None`` (not checked),
one warning is logged, ``dragoman_quality_check_errors_total`` counts it, and the next batch gets a
fresh pool.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from contract.language_detection import LanguageDetector
from contract.quality import QualityFlags
from worker.quality_check import CheckInput, check_texts

log = logging.getLogger(__name__)

BATCH_SIZE = 64
"""Checks sent in one executor call at most: large enough to pay the pickling round trip once per many jobs."""

_child_detector: LanguageDetector | None = None


def _start_child(min_confidence: float, language_check: bool) -> None:
    """Child initializer: load the language detector once, before the first batch."""
    global _child_detector
    if not language_check:
        return
    detector = LanguageDetector(min_confidence)
    try:
        detector.guess("warm up")
    except Exception as exc:  # the other checks still run; the parent logged the same at its own warm-up
        log.warning("the language detector did not load in a check process (%s)", exc)
        return
    _child_detector = detector


def _warm() -> bool:
    """Nothing: a call that makes the pool start its process (and so run :func:`_start_child`)."""
    return _child_detector is not None


def check_batch(items: list[CheckInput]) -> list[QualityFlags | None]:
    """Every check on each item, in a check process; ``None`` for an item whose check raised."""
    results: list[QualityFlags | None] = []
    for item in items:
        try:
            results.append(check_texts(item, _child_detector))
        except Exception:
            log.exception("a quality check raised")
            results.append(None)
    return results


class QualityCheckPool:
    """Runs :func:`worker.quality_check.check_texts` in ``processes`` spawned children, batched.

    Owned by the consumer: :meth:`start` before jobs flow, :meth:`close` after the last job drained.
    """

    def __init__(
        self,
        processes: int,
        min_confidence: float,
        *,
        language_check: bool,
        on_error: Callable[[int], None],
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self._processes = processes
        self._initargs = (min_confidence, language_check)
        self._on_error = on_error
        self._batch_size = batch_size
        self._executor: ProcessPoolExecutor | None = None
        self._pending: list[tuple[CheckInput, asyncio.Future[QualityFlags | None]]] = []
        self._scheduled = False
        self._batches: set[asyncio.Task[None]] = set()
        self.executor_calls = 0
        self.started = False

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self._processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_child,
            initargs=self._initargs,
        )

    async def start(self) -> None:
        """Spawn the children and let each load the detector, so that the first jobs do not wait for it."""
        self.started = True
        if self._executor is None:
            self._executor = self._new_executor()
        loop = asyncio.get_running_loop()
        warm = [loop.run_in_executor(self._executor, _warm) for _ in range(self._processes)]
        await asyncio.gather(*warm, return_exceptions=True)

    def process_ids(self) -> list[int]:
        """The children's process ids (for tests and diagnostics)."""
        processes = getattr(self._executor, "_processes", None) or {}
        return list(processes)

    async def check(self, item: CheckInput) -> QualityFlags | None:
        """The flags of one translation, computed in a child; ``None`` if the check could not run."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[QualityFlags | None] = loop.create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self._batch_size:
            self._send()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._send)
        return await future

    def _send(self) -> None:
        """Send the pending checks as one batch (a task owned here until it ends)."""
        self._scheduled = False
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        task = asyncio.create_task(self._run(batch), name="dragoman-quality-batch")
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _run(self, batch: list[tuple[CheckInput, asyncio.Future[QualityFlags | None]]]) -> None:
        if self._executor is None:
            self._executor = self._new_executor()
        executor = self._executor
        self.executor_calls += 1
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                executor, check_batch, [item for item, _ in batch]
            )
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_result(None)
            if isinstance(exc, asyncio.CancelledError):
                raise
            self._on_error(len(batch))
            if self._executor is executor:  # the first batch to see it: one warning per failure, one new pool
                log.warning(
                    "the quality check process failed (%s: %s); the translations it held are left unchecked "
                    "(quality_flags null), the next ones go to a new process",
                    type(exc).__name__,
                    exc,
                )
                self._executor = None
                executor.shutdown(wait=False, cancel_futures=True)
            return
        failed = 0
        for (_, future), flags in zip(batch, results, strict=True):
            failed += flags is None
            if not future.done():
                future.set_result(flags)
        if failed:
            log.warning("%d quality checks raised in the check process; those translations are left unchecked", failed)
            self._on_error(failed)

    async def close(self) -> None:
        """Finish the batches under way and shut the children down (waited for, off the event loop)."""
        self._send()
        if self._batches:
            await asyncio.wait(set(self._batches))
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, True)
