"""The stream consumer: keeps the engine full from the jobs streams, one task per job.

It reads with ``XREADGROUP`` only as many entries as there are free slots (``max_in_flight``,
about twice the engine's ``max_num_seqs``, so vLLM's waiting queue never runs dry), marks them
running, and starts one task per job. A task holds its slot until its result is in the
writer's buffer, so a slow database stops the reading instead of filling memory. What each read
asks of the interactive and the bulk lane is the worker's lane policy's to say (``worker.lanes``:
shared by weight, interactive first, or bulk first); the reading, and what it must never do, is here.

**Shards** (``DRAGOMAN_REDIS_SHARDS``, issue 37). Each shard is a whole queue with its own two lanes
(``RedisKeys.shards``). The consumer runs one read loop per shard, all taking slots from the one
semaphore; each loop reads only its shard's lanes (both in one ``XREADGROUP``: one hash tag, legal on a
Redis Cluster), refills them, claims their stale entries and starts their jobs on that shard (START), and
hands each result to the writer with the shard it was read from. Fairness comes from the semaphore,
whose waiters are served in turn: the loops read one after the other, each taking the slots that freed
since (at most its share, ``max_in_flight / shards``), so a shard with 10,000 jobs waiting cannot keep
another shard's first job from the next read.
With several shards a loop whose shard has nothing gives back all but :data:`_BLOCKING_SLOTS` slots
before it blocks (``read_block_ms``), so an empty shard never holds slots another shard's jobs need; with
one shard (the default) nothing changes: the loop blocks holding its slots, as it always did. A shard
whose server fails (its primary failing over) is backed off alone, logged once; the others go on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.consumer_groups import ensure_group
from broker.control import CancelRequests
from broker.fair_share import LaneRefiller
from broker.heartbeats import HEARTBEAT_TTL_S
from broker.keys import RedisKeys, served_keys
from broker.lanes import SHARD_UNAVAILABLE, Entries, StreamEntries, read_own_pending, wait_for_new
from broker.pending import claim_orphans, claim_stale
from broker.redis_client import connection_faults_as_errors
from broker.scripts import StartOutcome, StartScript
from broker.state_records import record_types
from contract.backoff import Backoff
from contract.controls import AUTO_LANGUAGE, glossary_misses
from contract.errors import (
    ConfigurationError,
    DegenerateOutputError,
    EngineUnavailableError,
    LanguageNotDetectedError,
    MalformedEntryError,
    TruncatedTranslationError,
    UnrunnableJobError,
)
from contract.language_detection import LanguageDetector
from contract.quality import QualityFlags
from contract.schemas import JobSpec, JobStatus, Lane
from contract.settings import Settings
from contract.wire import decode_job_entry, read_job_id
from worker.lanes import LanePolicy, lane_policy
from worker.memory import TranslationMemory
from worker.metrics import WorkerMetrics
from worker.profiles.base import Sampling
from worker.quality_check import CheckInput, check_texts
from worker.quality_pool import QualityCheckPool
from worker.results import DeadLetter, JobResult, storable_text
from worker.translator import RETRY_SAMPLING, Translation, Translator
from worker.writer import ResultWriter

log = logging.getLogger(__name__)

_MAX_READ = 512  # entries per XREADGROUP, whatever the number of free slots
_REMEMBERED_CANCELS = 10_000
_BLOCKING_SLOTS = 2
"""With several shards, the slots a read loop keeps while it blocks on its empty shard (one per lane)."""


@dataclass(eq=False)
class _Shard:
    """One shard's reading state in a consumer: its names, scripts, lane policy, refills and cursors."""

    keys: RedisKeys
    start: StartScript
    policy: LanePolicy
    refiller: LaneRefiller
    lane_of_stream: dict[str, Lane]
    next_reclaim: float = 0.0
    reclaim_start: dict[Lane, str] = field(default_factory=lambda: dict.fromkeys(Lane, "0-0"))
    own_cursor: dict[Lane, str] = field(default_factory=lambda: dict.fromkeys(Lane, "0"))  # ">" once exhausted
    down_since: float | None = None  # when reading it began to fail (logged once), None while it answers

    @property
    def number(self) -> int:
        """The shard's number (0 .. shards - 1)."""
        return self.keys.shard


@dataclass(eq=False)
class _Taken:
    """The slots one read holds: what it took, less what it gave back before blocking."""

    count: int


class StreamConsumer:
    """Reads jobs for one consumer of the group and runs each through the translator."""

    def __init__(
        self,
        settings: Settings,
        redis: aioredis.Redis,
        translator: Translator,
        writer: ResultWriter,
        consumer_name: str,
        max_in_flight: int,
        metrics: WorkerMetrics | None = None,
        memory: TranslationMemory | None = None,
    ) -> None:
        self._settings = settings
        self._memory = memory
        self._detector = LanguageDetector(settings.detection_min_confidence)
        self._checks = settings.quality_checks
        self._retry_on = settings.retry_flags  # an unknown flag name stops the worker at start
        if self._retry_on and not self._checks:
            raise ConfigurationError(
                "DRAGOMAN_RETRY_ON_FLAGS needs the quality checks: unset it or set DRAGOMAN_QUALITY_CHECKS=true"
            )
        self._language_check: LanguageDetector | None = self._detector if self._checks else None
        self._metrics = metrics if metrics is not None else WorkerMetrics()
        self.quality_pool: QualityCheckPool | None = None
        if self._checks and settings.quality_check_processes > 0:
            self.quality_pool = QualityCheckPool(
                settings.quality_check_processes,
                settings.detection_min_confidence,
                language_check=True,
                on_error=self._metrics.record_quality_check_errors,
            )
        self._keys = served_keys(settings)
        self._redis = redis
        self._translator = translator
        self._writer = writer
        self.consumer_name = consumer_name
        self.max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # job id -> its task
        self._requests: dict[str, str] = {}  # job id -> its current engine request id
        # job id -> the shard, lane and stream entry it came from
        self._entries: dict[str, tuple[int, Lane, str]] = {}
        self._cancelled: OrderedDict[str, None] = OrderedDict()
        self._stopping = asyncio.Event()
        self._held = dict.fromkeys(Lane, 0)  # jobs of each lane running here (with a task), all shards together
        shards = self._keys.shard_count
        # One read takes at most its shard's share of the slots, so that the first shard read cannot fill them all.
        self._read_most = _MAX_READ if shards == 1 else max(1, min(_MAX_READ, -(-max_in_flight // shards)))
        # Tenants' staged jobs are moved into a lane right before each read of it (broker.fair_share);
        # done whatever DRAGOMAN_FAIR_SHARE says, so that jobs staged before it was turned off still run.
        self._shards = [
            _Shard(
                keys=keys,
                start=StartScript(keys, settings.state_ttl_seconds),
                policy=lane_policy(settings, redis, keys),
                refiller=LaneRefiller(keys, settings.fair_share_quantum),
                lane_of_stream={stream: lane for lane, stream in keys.lanes},
            )
            for keys in self._keys.shards
        ]
        self.reclaimed = 0
        self.engine_failure: EngineUnavailableError | None = None
        self.failed = asyncio.Event()  # set when the engine is gone and the worker must stop

    def held_entries(self) -> list[tuple[int, Lane, str]]:
        """Shards, lanes and stream entries of the jobs running here."""
        return list(self._entries.values())

    def _held_here(self) -> list[tuple[int, Lane, str]]:
        """The entries running here or handed to the writer and not acknowledged yet."""
        return [*self._entries.values(), *self._writer.held_entries()]

    @property
    def lane_policy(self) -> LanePolicy:
        """What this consumer reads from each lane (``DRAGOMAN_LANE_POLICY``; each shard has its own, alike)."""
        return self._shards[0].policy

    @property
    def shards(self) -> int:
        """How many shards this consumer reads."""
        return len(self._shards)

    @property
    def in_flight(self) -> int:
        """Jobs holding a slot right now."""
        return len(self._tasks)

    async def ensure_group(self) -> None:
        """Create the consumer group on each lane's stream of every shard (reading it from its start) if it
        does not exist."""
        for shard in self._shards:
            for _, stream in shard.keys.lanes:
                await ensure_group(self._redis, stream, shard.keys.consumer_group)

    def stop_reading(self) -> None:
        """Make :meth:`run` return after its current read (at most ``read_block_ms`` later)."""
        self._stopping.set()

    async def run(self) -> None:
        """Read and dispatch jobs until :meth:`stop_reading` (or cancellation while all slots are busy).

        It first re-reads the entries this consumer name already owns (a restart with a stable
        ``DRAGOMAN_CONSUMER_NAME``), then new ones.
        """
        await self.ensure_group()
        await self._load_language_check()
        if len(self._shards) == 1:
            await self._read_shard(self._shards[0])
            return
        async with asyncio.TaskGroup() as loops:  # one fails: the others are cancelled and the error raised
            for shard in self._shards:
                loops.create_task(self._read_shard(shard), name=f"dragoman-reader-shard-{shard.number}")

    async def _read_shard(self, shard: _Shard) -> None:
        """One shard's read loop (see the module docstring): slots from the shared semaphore, entries from its lanes."""
        backoff = Backoff(0.2, 10.0)
        while not self._stopping.is_set():
            await self._slots.acquire()
            taken = _Taken(1 + await self.take_free_slots(self._read_most - 1))
            if self._stopping.is_set():  # asked to stop while waiting for a slot: read nothing more
                self.release_slots(taken.count)
                return
            try:
                with connection_faults_as_errors():
                    read = await self._next_entries(shard, taken)
                if shard.down_since is not None:
                    log.info(
                        "Redis answers again for shard %d, after %.0fs", shard.number, time.time() - shard.down_since
                    )
                    shard.down_since = None
                    self._recheck_own_pending(shard)
                backoff.reset()
            except SHARD_UNAVAILABLE as exc:
                self.release_slots(taken.count)
                delay = backoff.next_delay()
                self._shard_unavailable(shard, exc, delay)
                await asyncio.sleep(delay)
                continue
            except BaseException:
                self.release_slots(taken.count)
                raise
            self.release_slots(taken.count - sum(len(entries) for entries in read.values()))  # never more than taken
            for lane, entries in read.items():
                if entries:
                    await self.dispatch(entries, lane, shard.number)

    @staticmethod
    def _recheck_own_pending(shard: _Shard) -> None:
        """Read ``shard``'s entries pending under this consumer again, before new ones, at its next read.

        After an outage some may be ours without being held here: a START that failed left its entries
        pending, and a primary that failed over may have lost acknowledgements it had not replicated. No
        one else takes them (this consumer is alive) before the visibility timeout; the jobs running or
        written here are skipped.
        """
        shard.own_cursor = dict.fromkeys(Lane, "0")

    def _shard_unavailable(self, shard: _Shard, exc: Exception, delay: float) -> None:
        """Log a shard's read failure: a warning when it begins (once per outage with several shards), then debug."""
        if shard.down_since is None or len(self._shards) == 1:
            where = "" if len(self._shards) == 1 else f" shard {shard.number} (the other shards are read meanwhile)"
            log.warning("Redis unavailable while reading%s (%s); retrying in %.1fs", where, exc, delay)
        else:
            log.debug("shard %d still unavailable (%s); retrying in %.1fs", shard.number, exc, delay)
        if shard.down_since is None:
            shard.down_since = time.time()

    async def _load_language_check(self) -> None:
        """Load the language detector off the event loop before jobs flow (the quality check uses it on every job).

        A detector that cannot load leaves the ``wrong_language`` check out, with a warning; the other checks run.
        """
        if self._language_check is None:
            return
        if self.quality_pool is not None:
            await self.start_quality_checks()
            return
        try:
            await self._language_check.ready()
        except Exception as exc:
            log.warning("the language detector did not load (%s): wrong_language is not checked", _first_line(exc))
            self._language_check = None

    async def _next_entries(self, shard: _Shard, taken: _Taken) -> dict[Lane, Entries]:
        """Up to ``taken.count`` entries of ``shard``, never more (each holds a slot taken for it): own pending
        ones after a restart, else those of dead or stale consumers, else new ones."""
        count = taken.count
        if any(cursor != ">" for cursor in shard.own_cursor.values()):
            own = await self._read_own_pending(shard, count)
            if own:
                return own
        claimed = await self._claim_stale(shard, count)
        if claimed:
            return claimed
        return await self._read_new(shard, taken)

    async def _read_own_pending(self, shard: _Shard, count: int) -> dict[Lane, Entries]:
        """The next page of ``shard``'s entries this consumer name owned before a restart, one lane at a time."""
        for lane, stream in shard.keys.lanes:
            key = (shard.number, lane)
            cursor = shard.own_cursor[lane]
            if cursor == ">":
                continue
            page = await read_own_pending(self._redis, shard.keys, self.consumer_name, stream, cursor, count)
            if not page:
                shard.own_cursor[lane] = ">"
                continue
            shard.own_cursor[lane] = page[-1][0]
            held = {entry_id for number, held_lane, entry_id in self._held_here() if (number, held_lane) == key}
            # Own pending entries whose message was trimmed or deleted come back without fields.
            entries = [(entry_id, fields) for entry_id, fields in page if fields is not None and entry_id not in held]
            if entries:
                log.info("resuming %d %s jobs this consumer owns and does not run", len(entries), lane.value)
            return {lane: entries}
        return {}

    async def _read_new(self, shard: _Shard, taken: _Taken) -> dict[Lane, Entries]:
        """New entries for ``count`` free slots, as the lane policy plans them (see ``worker.lanes``).

        Each lane is first offered what the plan says (both reads in one round trip); slots left
        are then offered to the plan's top-up lanes that filled their offer (they may have more),
        each within its limit. Only when nothing was read does the read block, on the lanes the
        policy waits on.
        """
        count = taken.count
        plan = await shard.policy.plan(count, self._held)
        got = await self._read_lanes(shard, {lane: n for lane, n in plan.offers.items() if n})
        left = count - sum(len(entries) for entries in got.values())
        for lane in plan.top_up:
            if not left:
                break
            if len(got.get(lane, ())) < plan.offers.get(lane, 0):
                continue  # it had fewer than offered: nothing more waits there
            asked = min(left, plan.limits[lane] - len(got.get(lane, ())))
            if asked <= 0:
                continue
            try:
                more = (await self._read_lanes(shard, {lane: asked})).get(lane, [])
            except SHARD_UNAVAILABLE:
                if any(got.values()):  # run what was read; the next read meets the error again
                    break
                raise
            got[lane] = [*got.get(lane, ()), *more]
            left -= len(more)
        if any(got.values()):
            return got
        if len(self._shards) > 1 and count > _BLOCKING_SLOTS:  # an empty shard holds no slots others need
            self.release_slots(count - _BLOCKING_SLOTS)
            taken.count = _BLOCKING_SLOTS
        return await self._wait_for_entries(shard, taken.count)

    async def _wait_for_entries(self, shard: _Shard, count: int) -> dict[Lane, Entries]:
        """Block until a lane of ``shard`` the policy waits on has entries (at most ``read_block_ms``); never
        more than ``count`` in all.

        ``COUNT`` applies to each stream of an ``XREADGROUP``, so with both lanes in one blocking
        read each may bring half the slots (the policy's :class:`~worker.lanes.WaitPlan` says so).
        Reading more than there are slots would leave entries that no slot frees, on a worker
        whose reader holds them all.
        """
        wait = shard.policy.wait(count, self._held)
        assert wait.count * len(wait.lanes) <= count, wait
        keys = shard.keys
        streams = [keys.lane(lane) for lane in wait.lanes]
        # Staged jobs must never wait while every worker blocks: top the lanes up before blocking (a
        # lane this read does not wait on gets one entry, which a policy looking at it then sees).
        refills = {stream: wait.count if stream in streams else 1 for _, stream in keys.lanes}
        await shard.refiller.refill_and_read(self._redis, self.consumer_name, refills, {})
        return self._by_lane(
            shard, await wait_for_new(self._redis, keys, self.consumer_name, streams, wait.count, wait.block_ms)
        )

    async def _read_lanes(self, shard: _Shard, counts: dict[Lane, int]) -> dict[Lane, Entries]:
        """New entries of the given lanes, up to each one's count, without waiting (one round trip).

        Each lane read is refilled first, in the same round trip, with what it is about to be asked
        for; a lane not read, with one entry, so that a policy that looks at a lane before reading
        it (``bulk``'s look at the interactive lane) sees its staged jobs.
        """
        if not counts:
            return {}
        keys = shard.keys
        streams = {keys.lane(lane): n for lane, n in counts.items()}
        refills = {stream: streams.get(stream, 1) for _, stream in keys.lanes}
        return self._by_lane(
            shard, await shard.refiller.refill_and_read(self._redis, self.consumer_name, refills, streams)
        )

    def _by_lane(self, shard: _Shard, response: StreamEntries) -> dict[Lane, Entries]:
        """An ``XREADGROUP`` reply of ``shard`` (one item per stream) as entries per lane."""
        return {
            shard.lane_of_stream[stream]: [(entry_id, fields) for entry_id, fields in entries]
            for stream, entries in response
        }

    async def _claim_stale(self, shard: _Shard, count: int) -> dict[Lane, Entries]:
        """Every ``reclaim_interval_seconds``, take over ``shard``'s jobs of dead workers (heartbeat gone, or idle
        too long)."""
        now = time.monotonic()
        if now < shard.next_reclaim:
            return {}
        shard.next_reclaim = now + self._settings.reclaim_interval_seconds
        claimed: dict[Lane, Entries] = {}
        left = count
        limits = shard.policy.claim_limits(count, self._held)
        keys = shard.keys
        for lane, stream in keys.lanes:
            entries: Entries = []
            most = min(left, limits[lane])
            if not most:
                continue
            try:
                entries += await claim_orphans(
                    self._redis, keys, self.consumer_name, HEARTBEAT_TTL_S * 1000, most, stream
                )
                if len(entries) < most:
                    min_idle_ms = int(self._settings.visibility_timeout_seconds * 1000)
                    shard.reclaim_start[lane], stale = await claim_stale(
                        self._redis,
                        keys,
                        self.consumer_name,
                        min_idle_ms,
                        most - len(entries),
                        shard.reclaim_start[lane],
                        stream,
                    )
                    entries += stale
            except SHARD_UNAVAILABLE:
                # Entries claimed before the error are ours now: run them rather than leave them
                # pending under a live consumer (nobody would take them before the visibility timeout).
                if entries:
                    claimed[lane] = entries
                if claimed:
                    left -= len(entries)
                    break
                raise
            if entries:
                claimed[lane] = entries
                left -= len(entries)
            if not left:
                break
        reclaimed = count - left
        self.reclaimed += reclaimed
        self._metrics.record_reclaimed(reclaimed)
        return claimed

    async def take_free_slots(self, most: int) -> int:
        """Acquire up to ``most`` slots that are free right now, without waiting; return how many."""
        taken = 0
        while taken < most and not self._slots.locked():
            await self._slots.acquire()  # returns at once: a slot is free
            taken += 1
        return taken

    def release_slots(self, count: int) -> None:
        """Give back slots taken for entries that were not read."""
        for _ in range(count):
            self._slots.release()

    async def dispatch(self, entries: Entries, lane: Lane, shard: int = 0) -> None:
        """Mark decodable entries of ``shard``'s ``lane`` running (one round trip, on that shard) and start a
        task for each.

        Every entry already holds a slot; each path below gives it back exactly once. An entry
        that cannot be decoded, whatever the error, is dead-lettered with the reason. If Redis
        fails here, or refuses the start for a reason that is no one entry's, the entries stay
        pending (un-acked) and are reclaimed later.
        """
        try:
            with connection_faults_as_errors():
                await self._dispatch(entries, lane, self._shards[shard])
        except SHARD_UNAVAILABLE as exc:
            log.warning("Redis unavailable while starting %d jobs (%s); they stay pending", len(entries), exc)
            self._recheck_own_pending(self._shards[shard])
        except ResponseError as exc:
            log.error("Redis refused to start %d jobs (%s); they stay pending", len(entries), exc)

    async def _dispatch(self, entries: Entries, lane: Lane, shard: _Shard) -> None:
        number = shard.number
        now = time.time()
        decoded: list[tuple[str, JobSpec]] = []
        for entry_id, fields in entries:
            try:
                spec = decode_job_entry(fields, max_chars=self._settings.max_job_text_chars)
            except Exception as exc:  # malformed, or a bug that must stay this entry's problem
                await self._dead_letter(
                    entry_id, fields, _unreadable_reason(exc), read_job_id(fields), now, lane, number
                )
                continue
            if spec.lane is not lane or spec.model != self._keys.model:
                # The stream it came from decides its lane and model (where it is acknowledged, where a dead
                # letter of it is retried), whatever a plain-XADD producer wrote in the payload.
                spec = msgspec.structs.replace(spec, lane=lane, model=self._keys.model)
            if spec.job_id in self._tasks:  # reclaimed while still running here: keep the one running
                self._slots.release()
                continue
            decoded.append((entry_id, spec))
        if not decoded:
            return
        stuck: list[tuple[str, str]] = []  # (entry id, reason) of jobs whose state record START cannot use
        try:
            try:
                started = await self._mark_started(shard, decoded, now)
            except SHARD_UNAVAILABLE:
                raise
            except ResponseError as exc:
                foreign = await self._foreign_state_records(shard, decoded)
                if not foreign:
                    raise
                stuck = [
                    (
                        entry_id,
                        f"the job's state record is a Redis {foreign[spec.job_id]}, not a hash, so it cannot be "
                        f"started (Redis said: {_first_line(exc)}); `dragoman dead retry` replaces that key",
                    )
                    for entry_id, spec in decoded
                    if spec.job_id in foreign
                ]
                decoded = [item for item in decoded if item[1].job_id not in foreign]
                started = await self._mark_started(shard, decoded, now) if decoded else []
        except BaseException:
            self.release_slots(len(decoded) + len(stuck))
            raise
        runnable: list[tuple[str, JobSpec, int]] = []
        if stuck:
            fields_of = dict(entries)
            for entry_id, reason in stuck:  # not failed by id: the record is not ours to finalise
                await self._dead_letter(entry_id, fields_of[entry_id], reason, None, now, lane, number)
        for (entry_id, spec), outcome in zip(decoded, started, strict=True):
            attempts = outcome.attempts
            if outcome.cancelled:
                await self._finish(self._result(entry_id, spec, attempts, None, JobStatus.CANCELLED, shard=number))
            elif attempts > self._settings.max_attempts:
                reason = (
                    f"gave up after {attempts - 1} deliveries that never finished "
                    "(the worker running it stopped or crashed each time)"
                )
                log.warning("job %s: %s; dead-lettering it", spec.job_id, reason, extra={"job_id": spec.job_id})
                await self._finish(
                    self._result(
                        entry_id,
                        spec,
                        attempts - 1,
                        now,
                        JobStatus.FAILED,
                        error=reason,
                        dead_letter=True,
                        shard=number,
                    )
                )
            else:
                runnable.append((entry_id, spec, attempts))
        await self._start_jobs(runnable, lane, now, number)

    async def _start_jobs(self, runnable: list[tuple[str, JobSpec, int]], lane: Lane, now: float, shard: int) -> None:
        """Detect ``auto`` source languages, serve what the translation memory holds, start a task for the rest."""
        work: dict[str, JobSpec] = {}  # job id -> the spec to translate (its detected source language set)
        for entry_id, spec, attempts in runnable:
            if spec.source_lang != AUTO_LANGUAGE:
                work[spec.job_id] = spec
                continue
            try:
                await self._detector.ready()
                work[spec.job_id] = msgspec.structs.replace(spec, source_lang=self._source_language(spec))
            except LanguageNotDetectedError as exc:
                await self._finish(
                    self._result(entry_id, spec, attempts, now, JobStatus.FAILED, error=str(exc), shard=shard)
                )
            except Exception as exc:  # the detector itself is broken (not installed, say)
                log.exception("language detection failed for job %s", spec.job_id, extra={"job_id": spec.job_id})
                if spec.source_hints:  # a best guess is asked for: the likeliest hint, rather than a failure
                    work[spec.job_id] = msgspec.structs.replace(spec, source_lang=spec.source_hints[0])
                    continue
                error = f"source_lang 'auto': language detection failed on this worker ({_first_line(exc)})"
                await self._finish(
                    self._result(entry_id, spec, attempts, now, JobStatus.FAILED, error=error, shard=shard)
                )
        recalled = await self._memory.recall(list(work.values())) if self._memory is not None else {}
        hits: list[tuple[str, JobSpec, JobSpec, int, Translation]] = []
        for entry_id, spec, attempts in runnable:
            job = work.get(spec.job_id)
            if job is None:
                continue
            hit = recalled.get(spec.job_id)
            if hit is not None:
                hits.append((entry_id, spec, job, attempts, Translation(hit.translation, 0, 0, "stop", pieces=0)))
                continue
            previous = self._entries.get(spec.job_id)  # the same job twice in one read: counted once
            if previous is not None:
                self._held[previous[1]] -= 1
            self._entries[spec.job_id] = (shard, lane, entry_id)
            self._held[lane] += 1
            self._tasks[spec.job_id] = asyncio.create_task(
                self._run_job(entry_id, spec, job, attempts, now, shard), name=f"job-{spec.job_id}"
            )
        if hits:  # re-checked (the memory stores text only), all at once: one batch for the check process
            checked = await asyncio.gather(*(self._quality(job, done) for _, _, job, _, done in hits))
            for (entry_id, spec, job, attempts, done), flags in zip(hits, checked, strict=True):
                await self._finish(
                    self._succeeded(
                        entry_id, spec, job, attempts, now, done, from_memory=True, flags=flags, shard=shard
                    )
                )

    def _source_language(self, spec: JobSpec) -> str:
        """The language of an ``auto`` job's text: a best guess when the job carries source hints (never a
        failure), else a detection that raises :class:`LanguageNotDetectedError` when not confident."""
        if spec.source_hints:
            return self._detector.best_guess(spec.text, spec.source_hints).language
        return self._detector.detect(spec.text)

    async def _mark_started(self, shard: _Shard, decoded: list[tuple[str, JobSpec]], now: float) -> list[StartOutcome]:
        """Run the start script for the whole read in one call, on ``shard``; return what it found for each job."""
        return await shard.start.call(self._redis, self.consumer_name, now, [spec for _, spec in decoded])

    async def _foreign_state_records(self, shard: _Shard, decoded: list[tuple[str, JobSpec]]) -> dict[str, str]:
        """Job id -> the Redis type of its state record, for the records that are not hashes (START fails on them).

        Such a key was written by something other than dragoman; the job cannot be started until
        it is replaced, and it must not stop the jobs read with it.
        """
        types = await record_types(self._redis, shard.keys, [spec.job_id for _, spec in decoded])
        return {
            spec.job_id: kind for (_, spec), kind in zip(decoded, types, strict=True) if kind not in ("hash", "none")
        }

    async def _dead_letter(
        self,
        entry_id: str,
        fields: dict[str, str],
        reason: str,
        job_id: str | None,
        now: float,
        lane: Lane,
        shard: int,
    ) -> None:
        """Hand an entry that cannot be run to the writer: failed by ``job_id`` if given, then dead-lettered
        (on ``shard``, the one it was read from)."""
        log.warning("dead-lettering entry %s: %s", entry_id, reason, extra={"entry_id": entry_id, "job_id": job_id})
        await self._finish(
            DeadLetter(
                entry_id=entry_id,
                fields=dict(fields),
                reason=reason,
                job_id=job_id,
                finished_at=now,
                lane=lane,
                shard=shard,
            )
        )

    async def _finish(self, result: JobResult | DeadLetter) -> None:
        """Hand a result that needed no engine work to the writer and free its slot."""
        try:
            await self._writer.put(result)
        finally:
            self._slots.release()

    async def _run_job(
        self, entry_id: str, spec: JobSpec, work: JobSpec, attempts: int, started_at: float, shard: int
    ) -> None:
        try:
            result = await self._execute(entry_id, spec, work, attempts, started_at, shard)
            if result is not None:
                await self._writer.put(result)
        finally:
            self._tasks.pop(spec.job_id, None)
            self._requests.pop(spec.job_id, None)
            held = self._entries.pop(spec.job_id, None)
            if held is not None:
                self._held[held[1]] -= 1
            self._slots.release()

    async def _execute(
        self, entry_id: str, spec: JobSpec, work: JobSpec, attempts: int, started_at: float, shard: int
    ) -> JobResult | None:
        """Run one job, retrying engine errors until ``max_attempts``; ``None`` means leave it pending.

        ``work`` is ``spec`` as translated (its detected source language set); ``spec`` is what the row records.
        """
        attempt = attempts
        while True:
            if spec.job_id in self._cancelled:
                return self._result(entry_id, spec, attempt, started_at, JobStatus.CANCELLED, shard=shard)
            request_id = self._requests[spec.job_id] = f"{spec.job_id}-{attempt}"
            try:
                translation, shared = await self._translate(work, request_id)
            except UnrunnableJobError as exc:
                return self._result(entry_id, spec, attempt, started_at, JobStatus.FAILED, error=str(exc), shard=shard)
            except TruncatedTranslationError as exc:  # already retried once: another attempt would end the same
                log.warning("job %s: %s", spec.job_id, exc, extra={"job_id": spec.job_id})
                return self._result(
                    entry_id,
                    spec,
                    attempt,
                    started_at,
                    JobStatus.FAILED,
                    error=str(exc),
                    finish_reason="repetition" if isinstance(exc, DegenerateOutputError) else "length",
                    pieces=exc.pieces,
                    prompt_tokens=exc.prompt_tokens,
                    output_tokens=exc.output_tokens,
                    shard=shard,
                )
            except EngineUnavailableError as exc:
                if self.engine_failure is None:
                    log.error("engine unavailable, stopping this worker: %s", exc)
                    self.engine_failure = exc
                    self.failed.set()
                return None
            except Exception as exc:  # an error in this job only: retry, then fail it
                error = storable_text(f"{type(exc).__name__}: {exc}") or ""
                if attempt >= self._settings.max_attempts:
                    log.warning(
                        "job %s failed after %d attempts, dead-lettering it: %s",
                        spec.job_id,
                        attempt,
                        error,
                        extra={"job_id": spec.job_id},
                    )
                    return self._result(
                        entry_id,
                        spec,
                        attempt,
                        started_at,
                        JobStatus.FAILED,
                        error=error,
                        dead_letter=True,
                        shard=shard,
                    )
                log.info(
                    "job %s attempt %d failed (%s); retrying",
                    spec.job_id,
                    attempt,
                    error,
                    extra={"job_id": spec.job_id},
                )
                attempt += 1
                continue
            flags = await self._quality(work, translation)
            if flags and not shared and translation.finish_reason != "abort" and self._retry_on.intersection(flags):
                translation, flags, attempt = await self._retry_flagged(spec, work, attempt, translation, flags)
            if translation.finish_reason == "abort" or spec.job_id in self._cancelled:
                return self._result(
                    entry_id,
                    spec,
                    attempt,
                    started_at,
                    JobStatus.CANCELLED,
                    finish_reason=translation.finish_reason,
                    shard=shard,
                )
            if self._memory is not None and not shared and not self._retry_on.intersection(flags or ()):
                self._memory.remember(work, translation)
            return self._succeeded(
                entry_id, spec, work, attempt, started_at, translation, from_memory=shared, flags=flags, shard=shard
            )

    async def _retry_flagged(
        self, spec: JobSpec, work: JobSpec, attempt: int, first: Translation, first_flags: QualityFlags
    ) -> tuple[Translation, QualityFlags | None, int]:
        """Translate a job flagged with a ``DRAGOMAN_RETRY_ON_FLAGS`` flag once more, with sampling; keep the better.

        The better has fewer of the chosen flags (then fewer flags; the first on a tie). The kept
        translation carries the tokens and engine requests of both, and ``attempts`` one more; a chosen
        flag still there says so in its evidence. A retry that fails keeps the first translation.
        """
        chosen = self._retry_on
        log.info(
            "job %s flagged %s; translating it once more with sampling",
            spec.job_id,
            ", ".join(sorted(chosen.intersection(first_flags))),
            extra={"job_id": spec.job_id},
        )
        request_id = self._requests[spec.job_id] = f"{spec.job_id}-{attempt}-quality"
        try:
            second = await self._translator.translate(work, request_id, sampling=self._retry_sampling())
        except EngineUnavailableError as exc:
            if self.engine_failure is None:
                log.error("engine unavailable, stopping this worker: %s", exc)
                self.engine_failure = exc
                self.failed.set()
            return first, first_flags, attempt
        except Exception as exc:  # the retry only: the first translation stands
            log.warning("job %s: the quality retry failed (%s); keeping the first translation", spec.job_id, exc)
            self._metrics.record_quality_retry(better=False)
            return first, first_flags, attempt + 1
        if second.finish_reason == "abort":
            return second, first_flags, attempt + 1
        second_flags = await self._quality(work, second) or {}
        first_rank = (len(chosen.intersection(first_flags)), len(first_flags))
        better = (len(chosen.intersection(second_flags)), len(second_flags)) < first_rank
        self._metrics.record_quality_retry(better=better)
        kept, flags = (second, second_flags) if better else (first, first_flags)
        kept = msgspec.structs.replace(
            kept,
            prompt_tokens=first.prompt_tokens + second.prompt_tokens,
            output_tokens=first.output_tokens + second.output_tokens,
            pieces=first.pieces + second.pieces,
        )
        flags = {
            flag: f"{evidence} (still so after one retry with sampling)" if flag in chosen else evidence
            for flag, evidence in flags.items()
        }
        return kept, flags, attempt + 1

    def _retry_sampling(self) -> Sampling:
        """How a quality retry samples: the profile's own sampling if it samples, else :data:`RETRY_SAMPLING`."""
        sampling = self._translator.profile.sampling
        return sampling if sampling.temperature > 0 else RETRY_SAMPLING

    async def _quality(self, work: JobSpec, translation: Translation) -> QualityFlags | None:
        """The quality flags of a translation job's output; ``None`` for a raw-prompt job, with the checks off,
        or when the check process failed. Checked in :attr:`quality_pool`'s children, or inline without one."""
        if not self._checks or work.generation is not None:
            return None
        item = CheckInput(
            work.text, translation.text, work.source_lang, work.target_lang, work.glossary, work.inline_tags
        )
        if self.quality_pool is not None:
            flags = await self.quality_pool.check(item)
        else:
            flags = check_texts(item, self._language_check)
        if flags is None:
            return None
        return {flag: storable_text(evidence) or "" for flag, evidence in flags.items()} if flags else flags

    async def _translate(self, work: JobSpec, request_id: str) -> tuple[Translation, bool]:
        """The translation of ``work``, and whether an identical job running here produced it."""
        if self._memory is None:
            return await self._translator.translate(work, request_id), False
        return await self._memory.shared(work, lambda: self._translator.translate(work, request_id))

    def _succeeded(
        self,
        entry_id: str,
        spec: JobSpec,
        work: JobSpec,
        attempts: int,
        started_at: float,
        translation: Translation,
        *,
        from_memory: bool,
        flags: QualityFlags | None,
        shard: int,
    ) -> JobResult:
        """The result of a translated job: tokens only if this job generated them, what the controls left, its flags."""
        return self._result(
            entry_id,
            spec,
            attempts,
            started_at,
            JobStatus.SUCCEEDED,
            translation=translation.text,
            prompt_tokens=None if from_memory else translation.prompt_tokens,
            output_tokens=None if from_memory else translation.output_tokens,
            finish_reason=translation.finish_reason,
            pieces=None if from_memory else translation.pieces,
            from_memory=from_memory,
            detected_source_lang=work.source_lang if spec.source_lang == AUTO_LANGUAGE else None,
            glossary_misses=glossary_misses(work.glossary, work.text, translation.text) if work.glossary else None,
            inline_tags=translation.inline_tags,
            quality_flags=flags,
            shard=shard,
        )

    def _result(
        self, entry_id: str, spec: JobSpec, attempts: int, started_at: float | None, status: JobStatus, **fields: Any
    ) -> JobResult:
        for name in ("translation", "error"):
            if name in fields:
                fields[name] = storable_text(fields[name])
        return JobResult(
            entry_id=entry_id,
            spec=spec,
            status=status,
            attempts=attempts,
            started_at=started_at,
            finished_at=time.time(),
            model=self._keys.model,
            **fields,
        )

    async def cancel_running(self, job_id: str) -> None:
        """Abort a job in the engine (every piece of it) if it runs here; remember the id in case it starts soon."""
        self._cancelled[job_id] = None
        while len(self._cancelled) > _REMEMBERED_CANCELS:
            self._cancelled.popitem(last=False)
        request_id = self._requests.get(job_id)
        if request_id is not None:
            await self._translator.abort(request_id)

    async def listen_for_cancels(self) -> None:
        """Follow the control channel and abort cancelled jobs that are running here.

        Resubscribes after a lost connection (a cancel published while it was away is missed:
        that job then finishes normally).
        """
        backoff = Backoff(0.2, 10.0)
        while True:
            requests = CancelRequests(self._redis, self._keys)
            try:
                with connection_faults_as_errors():
                    await requests.connect()
                    backoff.reset()
                    async for job_id in requests.job_ids():
                        await self.cancel_running(job_id)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                delay = backoff.next_delay()
                log.warning("cancel channel lost (%s); resubscribing in %.1fs", exc, delay)
                await asyncio.sleep(delay)
            finally:
                await requests.close()

    async def drain(self, grace_seconds: float) -> int:
        """Wait up to ``grace_seconds`` for running jobs; cancel the rest (left un-acked).

        Returns how many jobs were left unfinished.
        """
        tasks = list(self._tasks.values())
        if not tasks:
            return 0
        _, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return len(pending)

    async def start_quality_checks(self) -> None:
        """Spawn the quality check processes and let them load the detector (idempotent)."""
        if self.quality_pool is not None and not self.quality_pool.started:
            await self.quality_pool.start()

    async def close_quality_checks(self) -> None:
        """Shut the quality check processes down (after :meth:`drain`: no job waits for a check any more)."""
        if self.quality_pool is not None:
            await self.quality_pool.close()


_MAX_REASON_CHARS = 2000


def _unreadable_reason(exc: Exception) -> str:
    """Why an entry could not be decoded, as the failed row and the dead letter store it."""
    if isinstance(exc, MalformedEntryError):
        reason = str(exc)
    else:
        log.error("decoding an entry failed unexpectedly", exc_info=exc)
        reason = f"the entry could not be read: {type(exc).__name__}: {exc}"
    return storable_text(reason[:_MAX_REASON_CHARS]) or ""


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
