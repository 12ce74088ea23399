"""The ResultWriter: finished jobs to PostgreSQL in writer batches, then ack and events in Redis.

Order is the whole point: rows are committed first, and only then are the stream entries
acknowledged, the state records finalised and the completion events published (one MULTI/EXEC).
A crash before the commit means the entries are redelivered; a crash after it means a duplicate
delivery that the upsert absorbs (a succeeded or cancelled row is never overwritten).

**Shards** (issue 37): each result carries the shard its entry was read from; a batch is acknowledged
with one FINISH (and its dead letters) per shard, with that shard's keys, on that shard. With several
shards, a shard whose FINISH fails (its primary failing over) is retried with backoff in a task of its
own, its later batches queued behind (per shard, in order), while the other shards' acknowledgements go
on: its rows are committed (the upsert absorbs a redelivery), its entries stay pending (kept alive while
held here) until it answers. With one shard the writer waits for it, as it always did.

A value PostgreSQL refuses is one job's problem: the writer batch is split in halves down to the row
that holds it, which is stored as a failure with its fields made storable, while the rest
commit. Only an outage is retried; no data error ends the writer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import redis.asyncio as aioredis

from broker.acknowledge import acknowledge_writer_batch
from broker.keys import served_keys
from broker.lanes import SHARD_UNAVAILABLE
from broker.redis_client import connection_faults_as_errors
from broker.scripts import FinishedJob, FinishScript, TenantEventRetention
from contract.backoff import Backoff
from contract.job_controls import job_controls
from contract.schemas import JobStatus, Lane, lane_of
from contract.settings import Settings
from contract.wire import JobEvent, encode_job_entry
from storage import (
    DatabaseUnavailableError,
    FinalRow,
    JobRows,
    JobRowWriter,
    RowRecord,
    UnstorableRowError,
    storable_failure,
)
from worker.metrics import WorkerMetrics
from worker.results import DeadLetter, JobResult

log = logging.getLogger(__name__)

_RETRY_INITIAL_S = 0.2
_RETRY_MAX_S = 10.0
GIVE_UP_ACKS_AFTER_S = 10.0
"""After :meth:`ResultWriter.close`, how long acknowledgements are retried on a shard that does not answer before
the writer gives them up (its rows are committed; its entries stay pending and are delivered again to another
worker, whose upsert absorbs them): a Redis down for good must not keep ``dragoman worker`` from ever stopping."""


@dataclass(slots=True)
class _ShardPart:
    """One writer batch's part on one shard: the FINISH of its jobs and entries there, and its dead letters."""

    jobs: list[FinishedJob] = field(default_factory=list)
    interactive: list[str] = field(default_factory=list)  # entry ids of the shard's interactive lane
    bulk: list[str] = field(default_factory=list)
    dead_letters: list[dict[str, str]] = field(default_factory=list)
    held: list[tuple[int, Lane, str]] = field(default_factory=list)  # what it releases from ResultWriter._held


@dataclass(frozen=True, slots=True)
class WriterStats:
    """Counters a benchmark or health check can read."""

    batches: int
    rows: int
    dead_letters: int


class ResultWriter:
    """Owns the path from a finished job to a committed row, an ack and an event.

    Producers of results call :meth:`put` (which waits when the buffer is full, so the worker
    stops reading new jobs); :meth:`run` is the one background task that writes; :meth:`close`
    asks it to flush everything and return.
    """

    def __init__(
        self, settings: Settings, redis: aioredis.Redis, database_url: str, metrics: WorkerMetrics | None = None
    ) -> None:
        self._settings = settings
        self._metrics = metrics if metrics is not None else WorkerMetrics()
        self._metrics.tenants.max_tenants = settings.metrics_max_tenants
        self._keys = served_keys(settings)
        self._shard_keys = self._keys.shards
        self._redis = redis
        tenant_events = TenantEventRetention(settings.tenant_events_maxlen, settings.tenant_events_retention_seconds)
        self._finishes = [
            FinishScript(keys, settings.finished_state_ttl_seconds, settings.events_maxlen, tenant_events)
            for keys in self._shard_keys
        ]
        self._job_rows: JobRows = JobRowWriter(database_url)
        self._queue: asyncio.Queue[JobResult | DeadLetter | None] = asyncio.Queue(maxsize=settings.writer_buffer_size)
        self._held: set[tuple[int, Lane, str]] = set()  # (shard, lane, entry) handed over and not yet acknowledged
        self._backlogs: dict[int, deque[_ShardPart]] = {}  # shard -> parts waiting for it to answer again
        self._retrying: dict[int, asyncio.Task[None]] = {}  # shard -> the task retrying its backlog
        self._unavailable_since: float | None = None
        self._give_up_at: float | None = None  # monotonic; set by close(): acknowledgements retried until then
        self._batches = 0
        self._rows = 0
        self._dead = 0

    @property
    def stats(self) -> WriterStats:
        """How much has been written so far."""
        return WriterStats(batches=self._batches, rows=self._rows, dead_letters=self._dead)

    @property
    def pending(self) -> int:
        """Results waiting to be written."""
        return self._queue.qsize()

    async def put(self, result: JobResult | DeadLetter) -> None:
        """Hand over a finished job; waits while the buffer is full."""
        self._held.add(_held_entry(result))
        try:
            self._queue.put_nowait(result)  # the usual case, without a coroutine per job
        except asyncio.QueueFull:
            await self._queue.put(result)

    def held_entries(self) -> list[tuple[int, Lane, str]]:
        """Shards, lanes and stream entries whose results are buffered or being written (not acknowledged yet)."""
        return list(self._held)

    @property
    def postgres_unavailable_since(self) -> float | None:
        """When the current PostgreSQL outage began, or ``None`` if writes are going through."""
        return self._unavailable_since

    async def close(self) -> None:
        """Ask :meth:`run` to write what is buffered and return.

        From now on a shard that does not acknowledge is retried for :data:`GIVE_UP_ACKS_AFTER_S` at most:
        then its acknowledgements are given up (left pending for another worker), so that stopping ends.
        """
        self._give_up_at = time.monotonic() + GIVE_UP_ACKS_AFTER_S
        await self._queue.put(None)

    def _retry_delay(self, backoff: Backoff) -> float | None:
        """The wait before the next acknowledgement retry, or ``None`` once closing has given them up."""
        delay = backoff.next_delay()
        if self._give_up_at is None:
            return delay
        left = self._give_up_at - time.monotonic()
        return None if left <= 0 else min(delay, left)

    def _give_up(self, shard: int, entries: int) -> None:
        log.error(
            "shard %d still does not acknowledge %.0fs after the worker began to stop: giving up %d acknowledgements "
            "(their rows are committed; the entries stay pending and another worker delivers them again)",
            shard,
            GIVE_UP_ACKS_AFTER_S,
            entries,
        )

    async def run(self) -> None:
        """Write writer batches until :meth:`close` is called and everything before it is written.

        Two writer batches overlap: the next one is committed while the previous one is acknowledged.
        Each batch still goes commit, then ack; acks happen in batch order, one at a time, and
        a third batch is not taken from the buffer before the first one is acknowledged.
        """
        batch_size = self._settings.writer_batch_size
        flush_s = self._settings.writer_flush_ms / 1000
        acking: asyncio.Task[None] | None = None
        try:
            closing = False
            while not closing:
                first = await self._queue.get()
                if first is None:
                    break
                if acking is not None and acking.done():
                    acking.result()  # a failed acknowledgement stops the writer
                for retry in list(self._retrying.values()):
                    if retry.done():
                        retry.result()  # so does a shard's retry that failed other than by an outage
                batch: list[JobResult | DeadLetter] = [first]
                closing = self._drain(batch, batch_size)
                if not closing and len(batch) < batch_size and flush_s > 0:
                    await asyncio.sleep(flush_s)
                    closing = self._drain(batch, batch_size)
                # Separate tasks, so that cancelling this one cannot split a commit from its ack.
                results = [item for item in batch if isinstance(item, JobResult)]
                dead = [item for item in batch if isinstance(item, DeadLetter)]
                commit = asyncio.create_task(self._commit(results, dead), name="dragoman-writer-commit")
                previous, acking = (
                    acking,
                    asyncio.create_task(
                        self._ack_after(batch, results, dead, commit, acking), name="dragoman-writer-ack"
                    ),
                )
                await asyncio.shield(commit)
                if previous is not None:  # at most two batches out of the buffer: bounded memory
                    await asyncio.shield(previous)
        finally:
            if acking is not None:
                await asyncio.gather(asyncio.shield(acking), return_exceptions=True)
            while self._retrying:  # shards still failing: their committed batches are acknowledged before the end
                await asyncio.gather(
                    *(asyncio.shield(t) for t in list(self._retrying.values())), return_exceptions=True
                )
            await self._job_rows.close()

    def _drain(self, batch: list[JobResult | DeadLetter], limit: int) -> bool:
        """Move buffered results into ``batch``; return True if the close marker was reached."""
        while len(batch) < limit:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                return False
            if item is None:
                return True
            batch.append(item)
        return False

    async def _ack_after(
        self,
        batch: Sequence[JobResult | DeadLetter],
        results: list[JobResult],
        dead: list[DeadLetter],
        commit: asyncio.Task[tuple[list[JobEvent], set[str], set[str]]],
        previous: asyncio.Task[None] | None,
    ) -> None:
        """Once ``commit`` is done and the previous batch is acknowledged, acknowledge this batch."""
        events, written, refused = await commit
        if previous is not None:
            await previous
        dead_letters = _dead_letter_entries(results, dead, events, refused)
        await self._acknowledge(batch, events, dead_letters)
        self._batches += 1
        self._rows += len(events)
        self._dead += len(dead_letters)
        self._metrics.record_writer_batch(
            results, events, written, batch_size=len(batch), dead_lettered=len(dead_letters), acked_at=time.time()
        )

    # PostgreSQL ------------------------------------------------------------------------------

    async def _commit(
        self, results: list[JobResult], dead: list[DeadLetter]
    ) -> tuple[list[JobEvent], set[str], set[str]]:
        """Upsert the batch's rows; return the events that match the rows, the ids written, and the ids refused.

        One transaction, unless a value is refused: then see :meth:`_write`.
        """
        unique: dict[str, JobResult] = {}
        for result in results:  # a job delivered twice in one batch is written once
            known = unique.get(result.spec.job_id)
            if known is None or (known.status is not JobStatus.SUCCEEDED):
                unique[result.spec.job_id] = result
        rows = list(unique.values())
        failed_by_id = {d.job_id: d for d in dead if d.job_id is not None and d.job_id not in unique}
        if not rows and not failed_by_id:
            return [], set(), set()
        backoff = Backoff(_RETRY_INITIAL_S, _RETRY_MAX_S)
        while True:
            try:
                outcome = await self._upsert(rows, list(failed_by_id.values()))
                if self._unavailable_since is not None:
                    log.info("PostgreSQL is back after %.0fs", time.time() - self._unavailable_since)
                    self._unavailable_since = None
                return outcome
            except DatabaseUnavailableError as exc:
                if self._unavailable_since is None:
                    self._unavailable_since = time.time()
                delay = backoff.next_delay()
                log.warning(
                    "PostgreSQL unavailable (%s); holding %d results, retrying in %.1fs",
                    _first_line(exc),
                    len(rows),
                    delay,
                )
                await self._job_rows.close()
                await asyncio.sleep(delay)

    async def _upsert(
        self, rows: list[JobResult], failed: list[DeadLetter]
    ) -> tuple[list[JobEvent], set[str], set[str]]:
        written, existing, refused = await self._write(_records(rows, failed))
        if refused:
            events = [
                _event(r) if (error := refused.get(r.spec.job_id)) is None else _refused_event(r, error)
                for r in rows
                if r.spec.job_id in written
            ]
        else:
            events = [_event(r) for r in rows if r.spec.job_id in written]
        events += [
            JobEvent(
                job_id=job_id, status=JobStatus.FAILED, finished_at=d.finished_at, error=refused.get(job_id, d.reason)
            )
            for d in failed
            if (job_id := d.job_id) is not None and job_id in written
        ]
        events += [
            JobEvent(
                job_id=row.id,
                status=JobStatus(row.status),
                finished_at=row.finished_at or 0.0,
                error=row.error,
                prompt_tokens=row.prompt_tokens,
                output_tokens=row.output_tokens,
            )
            for row in existing
        ]
        return events, written, set(refused)

    async def _write(self, records: list[RowRecord]) -> tuple[set[str], list[FinalRow], dict[str, str]]:
        """Write ``records``: in one statement, or split in halves around the rows PostgreSQL refuses.

        Returns the ids written, the final rows left alone, and job id -> error for each row that
        was refused and stored as a failure instead. Each half commits on its own: a batch
        retried after an outage finds those rows and the upsert absorbs them.
        """
        try:
            written, existing = await self._job_rows.write_rows(records)
            return written, existing, {}
        except UnstorableRowError as exc:
            if len(records) == 1:
                return await self._write_refused(records[0], exc)
            log.warning("a batch of %d rows holds a value PostgreSQL refuses (%s); splitting it", len(records), exc)
        middle = len(records) // 2
        written, existing, refused = await self._write(records[:middle])
        more_written, more_existing, more_refused = await self._write(records[middle:])
        return written | more_written, existing + more_existing, refused | more_refused

    async def _write_refused(
        self, record: RowRecord, exc: UnstorableRowError
    ) -> tuple[set[str], list[FinalRow], dict[str, str]]:
        """Store a refused row as a failure with storable fields (or, if even that is refused, a bare one)."""
        error = (
            f"the job's row could not be stored ({_first_line(exc)}); it was failed instead, "
            "with the values that cannot be stored replaced or left out"
        )[:2000]
        log.error("job %s: %s", record.id, error, extra={"job_id": record.id})
        for bare in (False, True):
            failure = storable_failure(record, error, bare=bare)
            try:
                written, existing = await self._job_rows.write_rows([failure])
            except UnstorableRowError as again:
                if bare:  # nothing of the row is left to refuse: the table itself does not take rows
                    raise UnstorableRowError(
                        f"PostgreSQL refuses even a bare failed row ({again}); check that its schema matches "
                        "this worker (`dragoman migrate`)"
                    ) from again
                continue
            return written, existing, {record.id: failure.error or error}
        raise AssertionError("unreachable")

    # Redis -----------------------------------------------------------------------------------

    async def _acknowledge(
        self,
        batch: Sequence[JobResult | DeadLetter],
        events: list[JobEvent],
        dead_letters: list[tuple[int, dict[str, str]]],
    ) -> None:
        """XACK every entry of the batch, finalise state records, publish events: one atomic script per shard."""
        parts = _parts_by_shard(batch, events, dead_letters)
        if len(self._shard_keys) == 1:  # one shard: wait for it, as the writer always did
            for shard, part in parts.items():
                await self._finish_retrying(shard, part)
            return
        await asyncio.gather(*(self._finish_shard(shard, part) for shard, part in parts.items()))

    async def _finish_once(self, shard: int, part: _ShardPart) -> None:
        """One FINISH of ``part`` on ``shard`` (with its dead letters, atomically); its entries are then released."""
        with connection_faults_as_errors():
            await acknowledge_writer_batch(
                self._redis,
                self._shard_keys[shard],
                self._finishes[shard],
                part.jobs,
                time.time(),
                (part.interactive, part.bulk),
                part.dead_letters,
            )
        self._held.difference_update(part.held)

    async def _finish_retrying(self, shard: int, part: _ShardPart) -> None:
        """FINISH ``part``, retrying with backoff while its shard is unavailable."""
        backoff = Backoff(_RETRY_INITIAL_S, _RETRY_MAX_S)
        while True:
            try:
                await self._finish_once(shard, part)
                return
            except SHARD_UNAVAILABLE as exc:
                delay = self._retry_delay(backoff)
                if delay is None:
                    self._give_up(shard, len(part.held))
                    return
                log.warning("Redis unavailable while acknowledging (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    async def _finish_shard(self, shard: int, part: _ShardPart) -> None:
        """FINISH ``part`` now, or, if its shard fails, leave it to that shard's retry task (the others go on)."""
        backlog = self._backlogs.get(shard)
        if backlog is not None:  # the shard is failing: behind its earlier parts, in order
            backlog.append(part)
            return
        try:
            await self._finish_once(shard, part)
        except SHARD_UNAVAILABLE as exc:
            log.warning(
                "Redis unavailable while acknowledging on shard %d (%s); retrying it in the background, "
                "the other shards are acknowledged meanwhile",
                shard,
                _first_line(exc),
            )
            self._backlogs[shard] = deque([part])
            self._retrying[shard] = asyncio.create_task(self._retry_shard(shard), name=f"dragoman-writer-shard-{shard}")

    async def _retry_shard(self, shard: int) -> None:
        """FINISH a failing shard's queued parts in order, with backoff, until none is left."""
        backlog = self._backlogs[shard]
        backoff = Backoff(_RETRY_INITIAL_S, _RETRY_MAX_S)
        started = time.time()
        try:
            while backlog:
                delay = self._retry_delay(backoff)
                if delay is None:
                    self._give_up(shard, sum(len(part.held) for part in backlog))
                    return
                await asyncio.sleep(delay)
                try:
                    while backlog:
                        await self._finish_once(shard, backlog[0])
                        backlog.popleft()
                except SHARD_UNAVAILABLE as exc:
                    log.debug("shard %d still unavailable while acknowledging (%s)", shard, _first_line(exc))
            log.info("shard %d acknowledges again, after %.0fs", shard, time.time() - started)
        finally:  # done, given up, or cancelled: what is left stays pending in Redis and is delivered again
            self._backlogs.pop(shard, None)
            self._retrying.pop(shard, None)


def _parts_by_shard(
    batch: Sequence[JobResult | DeadLetter], events: list[JobEvent], dead_letters: list[tuple[int, dict[str, str]]]
) -> dict[int, _ShardPart]:
    """The batch split by the shard each entry was read from: its entries, its jobs' events, its dead letters.

    A job's event goes to the shard its result was read from (where its state record, run and tenant
    sets are); a job read twice in one batch from two shards is finished on one, both entries acknowledged.
    """
    parts: dict[int, _ShardPart] = {}
    shard_of_job: dict[str, int] = {}
    for item in batch:
        shard, lane, entry_id = _held_entry(item)
        part = parts.setdefault(shard, _ShardPart())
        (part.interactive if lane is Lane.INTERACTIVE else part.bulk).append(entry_id)
        part.held.append((shard, lane, entry_id))
        job_id = item.spec.job_id if isinstance(item, JobResult) else item.job_id
        if job_id is not None:
            shard_of_job.setdefault(job_id, shard)
    owners = _owners(batch)
    for event in events:
        shard = shard_of_job.get(event.job_id, 0)
        parts.setdefault(shard, _ShardPart()).jobs.append(FinishedJob(event, *owners.get(event.job_id, _NO_OWNER)))
    for shard, letter in dead_letters:
        parts.setdefault(shard, _ShardPart()).dead_letters.append(letter)
    return parts


def _dead_letter_entries(
    results: list[JobResult], dead: list[DeadLetter], events: list[JobEvent], refused: set[str]
) -> list[tuple[int, dict[str, str]]]:
    """Dead-letter copies: malformed entries as they came, and jobs failed for good as re-runnable entries.

    A job is dead-lettered only if its row really says failed (a duplicate delivery of a job that
    succeeded elsewhere is not), and not when its row was refused: its own values are what
    failed it, so running it again cannot help (and the copy would carry them). Each copy comes with
    the shard its entry was read from: it goes to that shard's dead-letter stream.
    """
    now = repr(time.time())
    dead_letters = [
        (d.shard, {**_valid_fields(d.fields), "reason": d.reason, "entry_id": d.entry_id, "dead_lettered_at": now})
        for d in dead
    ]
    failed = {e.job_id for e in events if e.status is JobStatus.FAILED}
    dead_letters += [
        (
            r.shard,
            {**encode_job_entry(r.spec), "reason": r.error or "", "entry_id": r.entry_id, "dead_lettered_at": now},
        )
        for r in results
        if r.dead_letter and r.spec.job_id in failed and r.spec.job_id not in refused
    ]
    return dead_letters


def _held_entry(item: JobResult | DeadLetter) -> tuple[int, Lane, str]:
    """The shard, lane and stream entry a result acknowledges."""
    return item.shard, (item.lane if isinstance(item, DeadLetter) else lane_of(item.spec)), item.entry_id


_NO_OWNER: tuple[None, None] = (None, None)


def _owners(batch: Sequence[JobResult | DeadLetter]) -> dict[str, tuple[str | None, str | None]]:
    """Job id -> the run or document it belongs to and its tenant, for the jobs of the batch that have either.

    A malformed entry failed by its id names the tenant its payload gives, if it can be read:
    SUBMIT counted the job in that tenant's unfinished jobs.
    """
    owners: dict[str, tuple[str | None, str | None]] = {}
    for item in batch:
        if isinstance(item, JobResult):
            spec = item.spec
            group = spec.run_id or spec.document_id
            if group or spec.tenant:
                owners[spec.job_id] = (group, spec.tenant)
        elif item.job_id is not None:
            tenant = _loose_payload(item.fields).get("tenant")
            if isinstance(tenant, str) and tenant:
                owners.setdefault(item.job_id, (None, tenant))  # the job's own result, if any, wins
    return owners


def _refused_event(result: JobResult, error: str) -> JobEvent:
    return JobEvent(job_id=result.spec.job_id, status=JobStatus.FAILED, finished_at=result.finished_at, error=error)


def _event(result: JobResult) -> JobEvent:
    return JobEvent(
        job_id=result.spec.job_id,
        status=result.status,
        finished_at=result.finished_at,
        error=result.error,
        prompt_tokens=result.prompt_tokens,
        output_tokens=result.output_tokens,
    )


def _records(rows: list[JobResult], failed: list[DeadLetter]) -> list[RowRecord]:
    """The upsert's rows: results first, then failed rows for malformed entries that carry an id."""
    records = [
        RowRecord(
            s.job_id,
            r.status.value,
            s.source_lang,
            s.target_lang,
            s.text,
            r.translation,
            r.error,
            r.attempts,
            r.model,
            r.prompt_tokens,
            r.output_tokens,
            s.created_at,
            r.started_at,
            r.finished_at,
            s.metadata,
            s.run_id,
            s.document_id,
            s.sequence,
            s.tenant,
            r.finish_reason,
            r.pieces,
            r.detected_source_lang,
            r.glossary_misses,
            r.from_memory,
            r.inline_tags,
            r.quality_flags,
            job_controls(s),
        )
        for r in rows
        for s in (r.spec,)
    ]
    for d in failed:
        assert d.job_id is not None
        payload = _loose_payload(d.fields)
        records.append(
            RowRecord(
                d.job_id,
                JobStatus.FAILED.value,
                _text(payload.get("source_lang"), "und"),
                _text(payload.get("target_lang"), "und"),
                _text(payload.get("text"), ""),
                None,
                d.reason,
                1,
                None,
                None,
                None,
                d.finished_at,
                None,
                d.finished_at,
                {},
                None,
                None,
                None,
            )
        )
    return records


def _valid_fields(fields: dict[str, str]) -> dict[str, str]:
    """``fields`` with bytes that were not UTF-8 (read as lone surrogates) shown as U+FFFD."""
    return {_valid_text(key): _valid_text(value) for key, value in fields.items()}


def _valid_text(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _loose_payload(fields: dict[str, str]) -> dict[str, Any]:
    """Whatever can be read of a malformed entry's payload, for the failed row's columns."""
    try:
        payload = msgspec.json.decode(fields.get("payload", ""))  # refuses lone surrogates, unlike json
    except (ValueError, RecursionError):
        return {}
    return payload if isinstance(payload, dict) else {}


def _text(value: object, default: str) -> str:
    return value.replace("\x00", "") if isinstance(value, str) else default


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
