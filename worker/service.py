"""The worker as a whole: one consumer, one writer, one cancel listener, and their shutdown.

:class:`Worker` owns every background task it starts and cancels and awaits each one on the
way out, in the order that loses nothing: stop reading, let running jobs finish (within the
grace period), flush the writer, then close the connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from pathlib import Path

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.heartbeats import HEARTBEAT_INTERVAL_S, delete_heartbeat, write_heartbeat
from broker.keys import served_keys
from broker.model_registry import pin_default_model, register_served_names
from broker.redis_client import connection_faults_as_errors, open_redis
from contract.models import served_names
from contract.schemas import Lane
from contract.settings import Settings
from contract.version import dragoman_version
from worker.consumer import StreamConsumer
from worker.engine import TranslationEngine
from worker.memory import TranslationMemory, model_identity
from worker.metrics import WorkerMetrics
from worker.ops_server import OpsServer
from worker.profiles import PromptProfile
from worker.reclaim import Housekeeper
from worker.translator import Translator
from worker.writer import ResultWriter

log = logging.getLogger(__name__)


def new_consumer_name() -> str:
    """A consumer name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs jobs from the stream through one engine until stopped.

    ``engine_plan`` is :meth:`worker.device_defaults.EnginePlan.summary` of its engine (eager or graphs, batch,
    memory share, jobs in flight, each with where it came from), written in its heartbeat for ``dragoman stats``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        redis_url: str,
        database_url: str,
        engine: TranslationEngine,
        profile: PromptProfile,
        max_in_flight: int,
        consumer_name: str | None = None,
        metrics: WorkerMetrics | None = None,
        model_path: Path | None = None,
        engine_plan: str = "",
    ) -> None:
        self.settings = settings
        self.served_names = served_names(settings.served_model_names, settings.default_model)
        self._served = {  # /v1/models; "controls": what the doors may ask of this model (DeepL's formality)
            "profile": profile.identity,
            "model_path": str(model_path or engine.model_name),
            "controls": ",".join(sorted(control.value for control in profile.supports)),
        }
        self.keys = served_keys(settings)
        self.engine_plan = engine_plan  # the engine's settings and where each came from (its heartbeat's ``engine``)
        self.metrics = metrics if metrics is not None else WorkerMetrics()
        self.redis: aioredis.Redis = open_redis(redis_url, encoding_errors="surrogateescape")
        self.writer = ResultWriter(settings, self.redis, database_url, self.metrics)
        self.memory = TranslationMemory(
            settings,
            database_url,
            model_id=model_identity(engine.model_name, model_path),
            profile_id=profile.identity,
        )
        self.consumer = StreamConsumer(
            settings,
            self.redis,
            Translator(
                engine,
                profile,
                settings.max_new_tokens,
                settings.output_tokens_ratio,
                max_piece_chars=settings.max_piece_chars,
                length_retry_factor=settings.length_retry_factor,
            ),
            self.writer,
            consumer_name or settings.consumer_name or new_consumer_name(),
            max_in_flight,
            self.metrics,
            self.memory if settings.memory_enabled else None,
        )
        self.metrics.track_in_flight(lambda: self.consumer.in_flight)
        self.metrics.track_memory(lambda: self.memory.counters)
        self.ops: OpsServer | None = None
        if settings.metrics_enabled:
            self.ops = OpsServer(
                settings,
                redis_url=redis_url,
                database_url=database_url,
                metrics=self.metrics,
                engine_state=self._engine_state,
            )
        self.housekeeper = Housekeeper(settings, self.redis, self.consumer.consumer_name, self._held_entries)
        self._housekeeping: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._remembering: asyncio.Task[None] | None = None
        self._started_at = repr(time.time())
        self._stopped = False

    async def start(self) -> None:
        """Join the consumer group and start reading, writing and listening for cancels."""
        # Names first: a worker that disagrees with the deployment refuses before it creates a group anywhere.
        await pin_default_model(self.redis, self.keys)
        for name, model in (await register_served_names(self.redis, self.keys, self.served_names)).items():
            log.warning("the name %r served model %r before; from now on it names %r", name, model, self.keys.model)
        await self.consumer.ensure_group()
        if self.ops is not None:
            await self.ops.start()
        # Beat before the first read: other workers take over the entries of a consumer without one.
        self._started_at = repr(time.time())
        with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
            await self._write_heartbeat()
        self._heartbeat = asyncio.create_task(self._beat(), name="dragoman-heartbeat")
        self._writer = asyncio.create_task(self.writer.run(), name="dragoman-writer")
        self._listener = asyncio.create_task(self.consumer.listen_for_cancels(), name="dragoman-cancels")
        await self.consumer.start_quality_checks()  # spawned and warm before the first job is read
        self._reader = asyncio.create_task(self.consumer.run(), name="dragoman-reader")
        self._housekeeping = asyncio.create_task(self.housekeeper.run(), name="dragoman-housekeeping")
        self._remembering = asyncio.create_task(self.memory.run(), name="dragoman-memory")
        log.info(
            "worker %s (dragoman %s) serving model %s%s, reading %s and %s%s (group %s, up to %d jobs in flight, %s)",
            self.consumer.consumer_name,
            dragoman_version(),
            self.keys.model,
            f" (also named {', '.join(self.served_names[1:])})" if len(self.served_names) > 1 else "",
            self.keys.jobs_stream,
            self.keys.bulk_jobs_stream,
            f" on each of {self.consumer.shards} shards" if self.consumer.shards > 1 else "",
            self.settings.consumer_group,
            self.consumer.max_in_flight,
            self.consumer.lane_policy.describe(),
        )

    def _engine_state(self) -> str:
        """``"ok"`` while the worker takes jobs, else why not (for ``/readyz``)."""
        if self.consumer.engine_failure is not None:
            return f"engine unavailable: {self.consumer.engine_failure}"
        if self._stopped:
            return "draining: the worker is shutting down"
        return "ok"

    def _held_entries(self) -> list[tuple[int, Lane, str]]:
        return [*self.consumer.held_entries(), *self.writer.held_entries()]

    async def _write_heartbeat(self) -> None:
        """Refresh this worker's heartbeat hash (what it does, for operators) and its expiry."""
        down = self.writer.postgres_unavailable_since
        with connection_faults_as_errors():
            await write_heartbeat(
                self.redis,
                self.keys,
                self.consumer.consumer_name,
                {
                    "started_at": self._started_at,
                    "pid": os.getpid(),
                    "beat_at": repr(time.time()),
                    "in_flight": self.consumer.in_flight,
                    "written": self.writer.stats.rows,
                    "reclaimed": self.consumer.reclaimed,
                    "lane_policy": self.consumer.lane_policy.name,
                    "models": " ".join(self.served_names),
                    "engine": self.engine_plan,
                    **self._served,
                    "postgres_down_since": "" if down is None else repr(down),
                },
            )

    async def _beat(self) -> None:
        """Keep the heartbeat alive until the worker has flushed its last result, then delete it.

        Other workers take over the jobs of a consumer whose heartbeat has expired, so it must
        outlive the drain; deleting it at the end hands anything left over at once.
        """
        try:
            while True:
                await asyncio.sleep(HEARTBEAT_INTERVAL_S)
                try:
                    await self._write_heartbeat()
                except (RedisConnectionError, RedisTimeoutError) as exc:
                    log.warning("heartbeat failed: %s", exc)
        finally:
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError, RuntimeError):
                await asyncio.shield(delete_heartbeat(self.redis, self.keys, self.consumer.consumer_name))

    async def serve(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (or the engine dies); return the process exit code."""
        await self.start()
        assert self._reader is not None and self._writer is not None
        watchers = {
            asyncio.create_task(stop.wait()),
            asyncio.create_task(self.consumer.failed.wait()),
        }
        try:
            await asyncio.wait({*watchers, self._reader, self._writer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        await self.stop()
        crashed = [t for t in self._tasks() if t.done() and not t.cancelled() and t.exception() is not None]
        for task in crashed:
            log.error("worker task %s failed: %r", task.get_name(), task.exception(), exc_info=task.exception())
        return 1 if crashed or self.consumer.engine_failure is not None else 0

    def _tasks(self) -> list[asyncio.Task[None]]:
        tasks = (self._reader, self._writer, self._listener, self._heartbeat, self._housekeeping, self._remembering)
        return [task for task in tasks if task is not None]

    async def stop(self, grace_seconds: float | None = None) -> int:
        """Stop reading, drain running jobs, flush the writer, close; return jobs left pending.

        A task that crashed does not cut this short: what finished is still drained and written,
        and the crash stays on the task for :meth:`serve` to report.
        """
        if self._stopped:
            return 0
        self._stopped = True
        grace = self.settings.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        self.consumer.stop_reading()
        if self._reader is not None:
            await asyncio.wait({self._reader}, timeout=self.settings.read_block_ms / 1000 + 1)
        await _cancel(self._reader)  # still waiting for a free slot: nothing read is lost
        await _cancel(self._housekeeping)
        unfinished = await self.consumer.drain(grace)
        await self.consumer.close_quality_checks()
        if unfinished:
            log.warning("%d jobs did not finish within %.0fs; left un-acked for another worker", unfinished, grace)
        if self._writer is not None and not self._writer.done():
            await self.writer.close()
            await asyncio.wait({self._writer})
        await _cancel(self._heartbeat)  # only now: another worker may take over what is left
        await _cancel(self._listener)
        await _cancel(self._remembering)
        await self.memory.close()
        if self.ops is not None:
            await self.ops.close()
        await self.redis.aclose()
        log.info("worker %s stopped", self.consumer.consumer_name)
        return unfinished


async def _cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` and wait for it to end; an error it ended with is left on it, not raised.

    redis-py (8.1) sometimes swallows a cancellation that lands inside a blocking command and
    returns normally, so the task is cancelled again until it really ends.
    """
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
