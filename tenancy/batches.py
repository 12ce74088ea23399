"""OpenAI-compatible batches over dragoman runs: create (validate, then enqueue), follow, finalize, cancel.

A batch is a run with an OpenAI facade. Creating one validates every line of the input file
first (streaming, nothing enqueued if one is bad: the batch is ``failed`` with every bad line
listed), then writes the run and enqueues one job per line through the same scripts as any
other job, ids derived from the run id and the line's position. Its status is read from the
run's job rows. The server that enqueued it (or, if that one died, the next to read it) writes
its output file while the jobs finish (:mod:`tenancy.batch_output`) and completes the batch
when the last one does; a batch nobody follows is finalized by the first read that sees every
job finished. No process other than the API servers is needed.

A line naming a model nobody serves does not stop the batch (OpenAI answers such a request on
its own): its job is not queued but written at once as a failed row, which the error file
answers ``model_not_found``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import msgspec

from broker.queued_limit import QueuedJobLimit, Reservation, TooManyQueuedJobsError
from contract.errors import DragomanError, ModelNotFoundError
from contract.ids import job_id_for, new_job_id
from contract.schemas import JobSpec
from producer.async_client import AsyncClient
from producer.duplicates import DuplicateFinder, custom_ids_at
from producer.run_files import repeated_id_errors
from storage import (
    AsyncBatchStore,
    BatchRow,
    FileStore,
    JobRowWriter,
    RowRecord,
    RunTally,
    StoredFile,
    numbered_lines,
)
from tenancy.batch_lines import (
    ENDPOINTS,
    BadLineError,
    encode_output_line,
    error_line,
    model_not_found_error,
    numbered,
    parse_line,
)
from tenancy.batch_output import FOLLOW_SECONDS, OutputFollower
from tenancy.job_spill import JobSpill

log = logging.getLogger(__name__)

MAX_LISTED_ERRORS = 1_000
"""Bad lines listed in a failed batch's ``errors`` (the last entry says how many more there were)."""
MAX_METADATA_KEYS = 16
_WINDOW = re.compile(r"([1-9][0-9]{0,5})([smh])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3_600}
MAX_WINDOW_SECONDS = 7 * 24 * 3_600
_ACTIVE = ("in_progress", "cancelling", "finalizing")
VALIDATING_TIMEOUT_SECONDS = 1_800
"""A batch ``validating`` this long was being created by a server that died: the next read resumes it."""
RENDERED_BLOCK_BYTES = 1 << 20
RENDERED_BLOCKS_AHEAD = 4
"""An output file is rendered in blocks of about 1 MiB, up to 4 of them ahead of the writing."""
MAX_CREATING = 4
"""Batches one server validates and enqueues at once (others wait, ``validating``, for a slot)."""
MAX_FINALIZING = 4
"""Batches one server writes output files for at once (others wait, ``finalizing``, for a slot)."""
MAX_FOLLOWING = 16
"""Running batches one server writes output files for as their jobs finish (others are finalized at the end)."""
FINALIZE_WAIT_SECONDS = 2.0
"""How long a read that claimed a finished batch waits for its output before answering ``finalizing``:
writing 100,000 lines takes seconds, which a status read should not."""


def _counted(row: BatchRow, tally: RunTally) -> BatchRow:
    """``row`` with its run's counts as ``tally`` found them: completed, failed (cancelled included), flagged."""
    return replace(
        row,
        completed=tally.succeeded,
        failed=tally.failed + tally.cancelled,
        flagged=tally.flagged,
        flags=tally.flags,
    )


class BatchNotFoundError(DragomanError, LookupError):
    """No batch with this id for this tenant."""


class BatchFileNotFoundError(DragomanError, LookupError):
    """No file with this id for this tenant."""


class InvalidBatchError(DragomanError, ValueError):
    """A batch cannot be created as asked (endpoint, window, metadata or input file); ``param`` names the field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class BatchNotCancellableError(DragomanError):
    """The batch already finished (completed, failed or expired)."""


BATCH_PREFIX = "batch_"


def batch_id_for(run_id: str) -> str:
    """The batch id of a run: ``batch_`` and the run id's hex digits."""
    return BATCH_PREFIX + uuid.UUID(run_id).hex


def run_id_of_batch(batch_id: str) -> str:
    """The run id behind a batch id; :class:`BatchNotFoundError` if it is not one."""
    try:
        return str(uuid.UUID(batch_id.removeprefix(BATCH_PREFIX)))
    except ValueError:
        raise BatchNotFoundError(f"no batch with id {batch_id!r}") from None


def _window_seconds(window: str) -> int:
    """``24h`` (OpenAI's value), or any duration up to 7 days in ``s``, ``m`` or ``h`` (dragoman's extension)."""
    match = _WINDOW.fullmatch(window)
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else 0
    if not 0 < seconds <= MAX_WINDOW_SECONDS:
        raise InvalidBatchError(
            f'completion_window must be a duration like "24h" (at most 7 days), got {json.dumps(window)}',
            "completion_window",
        )
    return seconds


def _check_metadata(metadata: dict[str, Any] | None) -> dict[str, str] | None:
    if metadata is None:
        return None
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidBatchError(f"metadata has {len(metadata)} keys, over the limit of {MAX_METADATA_KEYS}", "metadata")
    for key, value in metadata.items():
        if len(key) > 64 or not isinstance(value, str) or len(value) > 512:
            raise InvalidBatchError(
                "metadata keys must be at most 64 characters and values strings of at most 512", "metadata"
            )
    return metadata


class BatchService:
    """The Batch API's operations for one tenant at a time, on the API's client and stores."""

    def __init__(
        self,
        client: AsyncClient,
        files: FileStore,
        batches: AsyncBatchStore,
        limit: QueuedJobLimit,
        *,
        create_wait_seconds: float = 10.0,
    ) -> None:
        self._client = client
        self._files = files
        self._batches = batches
        self._limit = limit
        self._create_wait = create_wait_seconds
        self._creating: set[asyncio.Task[BatchRow]] = set()
        self._slots = asyncio.Semaphore(MAX_CREATING)
        self._finalizing: set[asyncio.Task[BatchRow]] = set()
        self._output_slots = asyncio.Semaphore(MAX_FINALIZING)
        self._output = OutputFollower(files, batches, uuid.uuid4().hex)
        self._following: dict[str, asyncio.Task[None]] = {}

    async def close(self) -> None:
        """Stop the creations, output files and finalizations still running (their batches are released:
        the next read resumes them)."""
        tasks = [*self._creating, *self._finalizing, *self._following.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # Creating --------------------------------------------------------------------------------

    async def create(
        self,
        tenant: str,
        *,
        input_file_id: str,
        endpoint: str,
        completion_window: str,
        metadata: dict[str, Any] | None = None,
        max_queued_jobs: int | None = None,
    ) -> BatchRow:
        """Validate the input file and enqueue its lines; the batch (``in_progress``, or ``failed`` with its errors).

        The validation and the enqueueing run in a task of this service: if they take longer than
        ``create_wait_seconds`` (a large file), the batch is returned ``validating`` and they go on
        (as OpenAI's batches start ``validating``). With ``max_queued_jobs``, a batch whose lines
        would take the tenant past that many unfinished jobs fails (``queued_job_limit_exceeded``),
        nothing enqueued.
        """
        if endpoint not in ENDPOINTS:
            raise InvalidBatchError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}", "endpoint")
        window = _window_seconds(completion_window)
        checked = _check_metadata(metadata)
        source = await self._files.get(tenant, input_file_id)
        if source is None:
            raise BatchFileNotFoundError(f"no file with id {input_file_id!r}")
        if source.purpose != "batch":
            raise InvalidBatchError(
                f'file {input_file_id} has purpose {source.purpose!r}; upload the input with purpose "batch"',
                "input_file_id",
            )
        run_id = new_job_id()
        row = await self._batches.create(
            batch_id_for(run_id), tenant, run_id, endpoint, input_file_id, completion_window, window, checked
        )
        return await self._start(row, source, max_queued_jobs)

    async def _start(
        self, row: BatchRow, source: StoredFile, max_queued_jobs: int | None, *, resuming: bool = False
    ) -> BatchRow:
        """Validate and enqueue in a task of this service; the batch once that is done, or after the wait
        (a busy server answers ``validating``: the slot is waited for in the task, not in the request)."""
        created = await self._in_background(
            self._creating,
            self._slots,
            lambda: self._enqueue(row, source, max_queued_jobs, resuming=resuming),
            lambda: self._batches.release_validation(row.id),
            self._create_wait,
            "creating a batch",
        )
        return created or row

    async def _in_background(
        self,
        tasks: set[asyncio.Task[BatchRow]],
        slots: asyncio.Semaphore,
        work: Callable[[], Awaitable[BatchRow]],
        release: Callable[[], Awaitable[None]],
        wait: float,
        what: str,
    ) -> BatchRow | None:
        """Run ``work`` in a task of this service (in ``tasks``, holding one of ``slots``); its batch if it is
        done within ``wait`` seconds, else None while it goes on. Stopped (:meth:`close`) or failed, the
        task ``release``s the batch so that the next read, on any server, takes it up."""

        async def owned() -> BatchRow:
            try:
                async with slots:
                    return await work()
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.shield(release())
                raise

        def forget(task: asyncio.Task[BatchRow]) -> None:
            tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("%s failed (the next read tries again): %s", what, task.exception())

        task = asyncio.create_task(owned())
        tasks.add(task)
        task.add_done_callback(forget)
        done, _ = await asyncio.wait({task}, timeout=wait)
        return task.result() if done else None

    async def _enqueue(
        self, row: BatchRow, source: StoredFile, max_queued_jobs: int | None = None, *, resuming: bool = False
    ) -> BatchRow:
        """Validate every line, then enqueue one job per line; the batch ``in_progress`` (or ``failed``).

        Job ids derive from the run id and the line, and a job whose state record exists is left
        as it is (``only_new``), so enqueueing a batch again (``resuming`` one whose server died)
        writes only the jobs that are not queued yet; a resume also skips the lines whose job
        already has its row (its state record may have expired since).
        """
        async with JobSpill(self._client.settings.submit_chunk_size) as spill:
            began = time.monotonic()
            errors, total, unknown = await self._validate(source, row, spill)
            validated = time.monotonic()
            log.info("batch %s: %d lines validated in %.2fs", row.id, total, validated - began)
            if errors:
                return await self._batches.fail_validation(row.id, errors)
            started = await self._enqueue_valid(row, spill, total, max_queued_jobs, resuming, unknown)
            log.info("batch %s: %d jobs queued in %.2fs", row.id, total, time.monotonic() - validated)
            return started

    async def _enqueue_valid(
        self,
        row: BatchRow,
        spill: JobSpill,
        total: int,
        max_queued_jobs: int | None,
        resuming: bool,
        unknown: UnknownModels,
    ) -> BatchRow:
        """Queue the ``total`` jobs of a batch whose every line is valid (``spill`` holds them); those naming
        an ``unknown`` model are written as failed rows instead."""
        # Admitted atomically: the batch's jobs hold their places from here, claimed by id as they are queued.
        try:
            async with self._limit.reserved(row.tenant, max_queued_jobs, total - unknown.lines) as reservation:
                return await self._enqueue_admitted(row, spill, total, resuming, unknown, reservation)
        except TooManyQueuedJobsError as exc:
            error = {"code": "queued_job_limit_exceeded", "line": None, "message": str(exc)}
            return await self._batches.fail_validation(row.id, [error])

    async def _enqueue_admitted(
        self,
        row: BatchRow,
        spill: JobSpill,
        total: int,
        resuming: bool,
        unknown: UnknownModels,
        reservation: Reservation,
    ) -> BatchRow:
        """Queue the jobs of an admitted batch, each frame claimed from ``reservation`` before it is written."""
        run_id = row.run_id
        await self._batches.create_run(row.id, run_id, total)
        submitter = self._client.submitter
        # The finish script counts the queued jobs; the run is complete once every line has its row.
        await submitter.register_group(run_id, "run", total, skipped=unknown.sequences, tenant=row.tenant)
        finished = await self._batches.sequences_with_rows(run_id) if resuming else frozenset[int]()
        try:
            await self._write_jobs(spill, finished, unknown, reservation)
        except Exception:
            with contextlib.suppress(Exception):  # best effort: the services may be what failed
                await self._batches.fail_validation(
                    row.id,
                    [{"code": "submission_failed", "line": None, "message": "enqueueing failed; create it again"}],
                )
                await submitter.cancel_many([job_id_for(run_id, sequence) for sequence in range(total)])
            raise
        started = await self._batches.started(row.id, run_id, total)
        if started.status == "cancelling":  # cancelled while it was validating: its jobs exist only now
            await submitter.cancel_many([job_id_for(run_id, sequence) for sequence in range(total)])
        await self._follow(started)
        return started

    async def _write_jobs(
        self, spill: JobSpill, skip: frozenset[int], unknown: UnknownModels, reservation: Reservation
    ) -> None:
        """Queue every job of ``spill`` whose line is not in ``skip``, a frame (one round trip) at a time
        (``only_new``: see :meth:`_enqueue`).

        A job naming an ``unknown`` model gets its failed row instead, before the frame's jobs are queued: when
        the last queued job finishes, every line has its row.
        """
        submitter = self._client.submitter
        rows = JobRowWriter(self._client.database_url) if unknown.lines else None
        try:
            async for frame in spill.frames():
                kept = [spec for spec in frame if spec.sequence not in skip]
                if rows is not None:
                    refused = [spec for spec in kept if spec.model in unknown.names]
                    if refused:
                        now = time.time()
                        await rows.write_rows([_refused_row(spec, unknown.names, now) for spec in refused])
                        kept = [spec for spec in kept if spec.model not in unknown.names]
                await reservation.claim([spec.job_id for spec in kept])
                await submitter.write([(spec, None) for spec in kept], only_new=True)
        finally:
            if rows is not None:
                await rows.close()

    async def _validate(
        self, source: StoredFile, row: BatchRow, spill: JobSpill
    ) -> tuple[list[dict[str, Any]], int, UnknownModels]:
        """Every bad line (up to :data:`MAX_LISTED_ERRORS`), the number of requests and the models named that
        nobody serves, in one streaming pass; while every line so far is valid, each line's job goes to
        ``spill``, its model resolved (an alias: its model; an unknown name is kept, and written as a failed row).

        Repeated ``custom_id``s are found in bounded memory (:class:`~producer.duplicates.DuplicateFinder`
        spills sorted digests to disk; its final merge runs in a thread).
        """
        max_chars = self._client.settings.max_text_chars
        endpoint, run_id, tenant = row.endpoint, row.run_id, row.tenant
        errors: list[dict[str, Any]] = []
        bad = 0
        count = 0
        unknown = UnknownModels()
        resolved: dict[str, str | None] = {}  # a name -> its model (None: nobody serves it)
        with DuplicateFinder() as ids:
            async for number, raw in numbered_lines(self._files, source.id):
                count += 1
                try:
                    custom_id, spec = parse_line(raw, endpoint, max_chars=max_chars)
                    ids.add(custom_id, number)
                    if spec.model is not None:
                        spec = await self._resolved(spec, spec.model, resolved, unknown)
                        if spec.model in unknown.names:
                            unknown.sequences.add(count - 1)
                    if not bad:  # once a line is bad nothing is queued: the jobs need not be kept
                        await spill.add(numbered(spec, run_id, count - 1, tenant))
                except BadLineError as exc:
                    bad += 1
                    if len(errors) < MAX_LISTED_ERRORS:
                        errors.append({"code": "invalid_request", "line": number, "message": f"line {number}: {exc}"})
            repeated, repeats = await asyncio.to_thread(ids.duplicates_counted, MAX_LISTED_ERRORS - len(errors))
        names = await custom_ids_at(numbered_lines(self._files, source.id), {first for _, first in repeated})
        errors += [
            {"code": "invalid_request", "line": line, "message": message}
            for line, message in repeated_id_errors(repeated, names)
        ]
        errors.sort(key=lambda error: int(error["line"]))
        bad += repeats
        if bad > len(errors):
            errors.append({"code": "too_many_errors", "line": None, "message": f"{bad - len(errors)} more bad lines"})
        if count == 0 and not errors:
            errors.append({"code": "empty_file", "line": None, "message": "the input file has no requests"})
        return errors, count, unknown

    async def _resolved(
        self, spec: JobSpec, name: str, resolved: dict[str, str | None], unknown: UnknownModels
    ) -> JobSpec:
        """``spec`` with its model resolved (an alias: its model); a name nobody serves is kept and counted in
        ``unknown`` (each name is asked about once a batch: ``resolved``)."""
        if name not in resolved:
            try:
                resolved[name] = await self._client.submitter.models.resolve(name)
            except ModelNotFoundError as exc:
                resolved[name] = None
                unknown.names[name] = str(exc)
        model = resolved[name]
        if model is None:
            unknown.lines += 1
            return spec
        return spec if model == name else msgspec.structs.replace(spec, model=model)

    # Following -------------------------------------------------------------------------------

    async def get(self, tenant: str, batch_id: str) -> BatchRow:
        """The tenant's batch as it is now (finalized here if its last job just finished), with its jobs'
        quality flags counted (``flagged``, ``flags``)."""
        row = await self._batches.get(tenant, batch_id)
        if row is None:
            raise BatchNotFoundError(f"no batch with id {batch_id!r}")
        row = await self._refresh(row)
        if row.flagged is None and row.total and row.status != "validating":  # a final batch: counted here
            tally = await self._batches.tally(row.run_id)
            row = replace(row, flagged=tally.flagged, flags=tally.flags)
        return row

    async def list(self, tenant: str, *, after: str | None, limit: int) -> list[BatchRow]:
        """Up to ``limit`` of the tenant's batches, newest first, each as it is now (flags counted for the running
        ones only: a page of final batches costs no count of their jobs)."""
        return [await self._refresh(row) for row in await self._batches.list(tenant, after=after, limit=limit)]

    async def cancel(self, tenant: str, batch_id: str) -> BatchRow:
        """Cancel the batch's unfinished jobs: ``cancelling`` until they are, then ``cancelled``.

        Cancelling a cancelling or cancelled batch changes nothing; a finished one raises
        :class:`BatchNotCancellableError`.
        """
        row = await self._batches.request_cancel(tenant, batch_id)
        if row is None:
            raise BatchNotFoundError(f"no batch with id {batch_id!r}")
        if row.status in ("completed", "failed", "expired"):
            raise BatchNotCancellableError(f"batch {batch_id} is already {row.status}")
        if row.status == "cancelling" and row.total:
            await self._client.submitter.cancel_many([job_id_for(row.run_id, n) for n in range(row.total)])
        return await self._refresh(row)

    async def _refresh(self, row: BatchRow) -> BatchRow:
        if row.status == "validating":
            return await self._resume_if_stale(row)
        if row.status not in _ACTIVE:
            return row
        tally = await self._batches.tally(row.run_id)
        if tally.finished < row.total:
            if row.status == "in_progress" and row.expired_at is None and datetime.now(UTC) >= row.expires_at:
                row = await self._expire(row)
            if row.status != "finalizing" and (row.follow_until is None or row.follow_until < datetime.now(UTC)):
                await self._follow(row)  # nobody writes its output yet (its server died): this one will
            return _counted(row, tally)
        counted = _counted(row, tally)
        claimed = await self._batches.claim_finalizing(row.id)
        if claimed is None:  # another reader is writing the output
            return replace(counted, status="finalizing")
        finished = await self._in_background(
            self._finalizing,
            self._output_slots,
            lambda: self._finalize(claimed),
            lambda: self._batches.release_finalizing(claimed.id),
            FINALIZE_WAIT_SECONDS,
            "writing a batch's output",
        )
        if finished is not None:
            return replace(finished, flagged=tally.flagged, flags=tally.flags)
        return replace(counted, status="finalizing", finalizing_at=claimed.finalizing_at)

    async def _follow(self, row: BatchRow) -> None:
        """Write a running batch's output as its jobs finish, in a task of this service, unless another
        server does (its claim holds) or this one follows :data:`MAX_FOLLOWING` batches already."""
        if row.id in self._following or len(self._following) >= MAX_FOLLOWING:
            return
        try:
            claimed = await self._batches.claim_following(row.id, self._output.follower, FOLLOW_SECONDS)
            if claimed is None:
                return
            if claimed.partial_output_file_id:  # the file of a follower whose claim lapsed
                await self._files.discard(claimed.partial_output_file_id)
        except Exception as exc:  # the output is then written by a later read or at the end
            log.warning("could not start writing batch %s's output as it runs: %s", row.id, exc)
            return
        task = asyncio.create_task(self._follow_to_the_end(claimed))
        self._following[row.id] = task

        def forget(task: asyncio.Task[None]) -> None:
            self._following.pop(row.id, None)
            if not task.cancelled() and task.exception() is not None:
                log.error(
                    "writing batch %s's output failed (the next read takes it over): %s", row.id, task.exception()
                )

        task.add_done_callback(forget)

    async def _follow_to_the_end(self, row: BatchRow) -> None:
        """Follow the batch until its jobs are final, then finish it; stopped or failed, the batch is
        released for the next read."""
        try:
            followed = await self._output.follow(row)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._batches.release_following(row.id, self._output.follower))
            raise
        if followed is None:  # another server took it over
            return
        try:
            await self._finalize(followed.row, written_output=(followed.output_file_id,))
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._batches.release_finalizing(row.id))
            raise

    async def _resume_if_stale(self, row: BatchRow) -> BatchRow:
        """A batch ``validating`` past :data:`VALIDATING_TIMEOUT_SECONDS`: its server died; enqueue it here."""
        claimed = await self._batches.reclaim_validation(row.id, VALIDATING_TIMEOUT_SECONDS)
        if claimed is None:
            return row
        source = await self._files.get(row.tenant, row.input_file_id)
        if source is None:
            error = {"code": "creation_interrupted", "line": None, "message": "the input file was deleted"}
            return await self._batches.fail_validation(row.id, [error])
        return await self._start(claimed, source, None, resuming=True)

    async def _expire(self, row: BatchRow) -> BatchRow:
        """Past its window: cancel what has not run; the batch ends ``expired`` once they are drained."""
        expired = await self._batches.expire(row.id)
        if expired is None:  # another reader expired it first
            return row
        await self._client.submitter.cancel_many([job_id_for(row.run_id, n) for n in range(row.total)])
        return expired

    async def _finalize(self, row: BatchRow, written_output: tuple[str | None] | None = None) -> BatchRow:
        """Write the output file (succeeded lines, unless a follower wrote it: ``written_output``) and the
        error file (the others), in input order."""
        tally = await self._batches.tally(row.run_id)
        failed = tally.failed + tally.cancelled
        output_id = error_id = None
        if written_output is not None:
            (output_id,) = written_output
        else:
            if row.partial_output_file_id:  # a follower's unfinished file: written again here
                await self._files.discard(row.partial_output_file_id)
            if tally.succeeded:
                output_id = await self._write_file(row, "output", self._output_lines(row))
        if failed:
            error_id = await self._write_file(row, "errors", self._error_lines(row))
        status = "expired" if row.expired_at else "cancelled" if row.cancelling_at else "completed"
        return await self._batches.finish(
            row.id,
            status=status,
            output_file_id=output_id,
            error_file_id=error_id,
            completed=tally.succeeded,
            failed=failed,
        )

    async def _write_file(self, row: BatchRow, kind: str, lines: AsyncIterator[bytes]) -> str:
        """A file of ``lines`` (each an encoded JSON line, in input order) for the batch's ``kind``.

        The lines are read and rendered in a task of their own, a block ahead of the writing: reading
        the rows and storing the file then run side by side on two connections.
        """
        blocks: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=RENDERED_BLOCKS_AHEAD)

        async def render_blocks() -> None:
            block = bytearray()
            try:
                async for line in lines:
                    block += line
                    block += b"\n"
                    if len(block) >= RENDERED_BLOCK_BYTES:
                        await blocks.put(bytes(block))
                        block.clear()
                if block:
                    await blocks.put(bytes(block))
                await blocks.put(None)
            except Exception as exc:  # handed to the writer, which raises it
                await blocks.put(exc)

        async def rendered() -> AsyncIterator[bytes]:
            while (block := await blocks.get()) is not None:
                if isinstance(block, BaseException):
                    raise block
                yield block

        renderer = asyncio.create_task(render_blocks())
        try:
            stored = await self._files.create(
                row.tenant, "batch_output", f"{row.id}_{kind}.jsonl", rendered(), max_bytes=2**62
            )
        finally:
            renderer.cancel()
            await asyncio.gather(renderer, return_exceptions=True)
        return stored.id

    async def _output_lines(self, row: BatchRow) -> AsyncIterator[bytes]:
        """The output file's lines: the run's succeeded jobs, in input order."""
        async for output in self._batches.iter_output_rows(row.run_id):
            yield encode_output_line(output, row.endpoint)

    async def _error_lines(self, row: BatchRow) -> AsyncIterator[bytes]:
        """The error file's lines: the run's failed and cancelled jobs, in input order."""
        expired = row.expired_at is not None
        async for job, _ in self._batches.iter_jobs(row.run_id, succeeded=False):
            yield msgspec.json.encode(error_line(job, expired))


@dataclass(slots=True)
class UnknownModels:
    """What a batch's lines name that nobody serves: each name with the reason, and how many lines name one."""

    names: dict[str, str] = field(default_factory=dict)
    lines: int = 0
    sequences: set[int] = field(default_factory=set)
    """The numbers of those lines (never queued: the run's record counts the others, on each shard)."""


def _refused_row(spec: JobSpec, reasons: dict[str, str], finished_at: float) -> RowRecord:
    """The failed row of a line whose model nobody serves (it never reaches a queue)."""
    return RowRecord(
        id=spec.job_id,
        status="failed",
        source_lang=spec.source_lang,
        target_lang=spec.target_lang,
        source_text=spec.text,
        translated_text=None,
        error=model_not_found_error(reasons[spec.model or ""]),
        attempts=0,
        model=None,
        prompt_tokens=None,
        output_tokens=None,
        created_at=spec.created_at,
        started_at=None,
        finished_at=finished_at,
        metadata=spec.metadata,
        run_id=spec.run_id,
        document_id=None,
        sequence=spec.sequence,
        tenant=spec.tenant,
    )


def unix(moment: datetime | None) -> int | None:
    """A timestamp as OpenAI's integer Unix seconds."""
    return None if moment is None else int(moment.astimezone(UTC).timestamp())


__all__ = [
    "BATCH_PREFIX",
    "BatchFileNotFoundError",
    "BatchNotCancellableError",
    "BatchNotFoundError",
    "BatchService",
    "InvalidBatchError",
    "batch_id_for",
    "run_id_of_batch",
    "unix",
]
