"""Translating the segments through the running deployment: one job each, submitted and waited for.

Jobs go the way ``dragoman submit`` and the Python client send them (:class:`~producer.AsyncClient`:
Redis, then whichever live worker serves the model), so the scores are those of what production
serves. They are sent in the ``bulk`` lane (an evaluation should not push ahead of interactive
traffic) with the translation memory off (a remembered translation would score the memory, not the
model). Before anything is written, each model the jobs will reach must have a live worker;
otherwise :class:`~evaluation.segments.NoLiveWorkerError` says which to start. A job still queued
with no live worker for its model while we wait (the worker stopped) ends the wait with the same
error; a job not finished by the deadline is cancelled and reported as failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contract.errors import JobTimeoutError
from contract.quality import QualityFlags
from contract.schemas import Job, JobStatus, Lane, TranslationRequest
from evaluation.segments import NoLiveWorkerError, Segment
from producer.async_client import AsyncClient

_WAIT_SLICE_S = 5.0  # how often a long wait checks that the model still has a live worker


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one segment's job ended as: its translation, or the error it failed (or was cancelled) with."""

    job_id: str | None
    status: str  # a JobStatus value, or "timed_out"
    translation: str | None
    error: str | None
    quality_flags: QualityFlags | None  # None: not checked (a failed job, or no worker fills them in)

    @property
    def succeeded(self) -> bool:
        """Whether the job produced a translation."""
        return self.status == JobStatus.SUCCEEDED.value and self.translation is not None


Progress = Callable[[int, int], None]
"""Called with (finished, total) as jobs finish."""


def model_for(client: AsyncClient, segment: Segment, model: str | None) -> str:
    """The model name a segment's job asks for: ``model``, else the deployment's route for its pair."""
    if model is not None:
        return model
    assert segment.source_lang is not None and segment.target_lang is not None
    return client.submitter.models.router.route(segment.source_lang, segment.target_lang, Lane.BULK)


async def check_live_workers(client: AsyncClient, segments: Sequence[Segment], models: Sequence[str | None]) -> None:
    """Raise :class:`NoLiveWorkerError` (or ModelNotFoundError) unless every model the jobs reach has a live worker."""
    names = sorted({model_for(client, segment, model) for segment in segments for model in models})
    for name in names:
        served = await client.submitter.models.resolve(name)  # an unknown name: ModelNotFoundError
        if not await client.models.is_live(served):
            start = "dragoman worker" + (
                "" if served == client.submitter.models.router.default_model else f" --served-model-name {name}"
            )
            raise NoLiveWorkerError(
                f"model {name!r} has no live worker, so its jobs would wait forever; start one (`{start}`) and "
                "run dragoman eval again once it has logged that it is ready"
            )


async def submit(client: AsyncClient, segments: Sequence[Segment], model: str | None) -> list[str]:
    """One job per segment, in order, for ``model`` (None: the deployment's routes); their ids."""
    return await client.submit_many(
        TranslationRequest(
            segment.source,
            segment.source_lang or "",
            segment.target_lang or "",
            lane=Lane.BULK.value,
            memory=False,
            model=model,
            metadata={"eval": segment.origin[-200:]},
        )
        for segment in segments
    )


async def collect(
    client: AsyncClient, job_ids: Sequence[str], deadline: float, progress: Progress | None = None
) -> list[Outcome]:
    """Wait for every job in order (they run concurrently in the workers) and return how each ended.

    Past ``deadline`` (``time.monotonic()``) the unfinished jobs are cancelled and come back as ``timed_out``.
    """
    outcomes: list[Outcome] = []
    for index, job_id in enumerate(job_ids):
        job = await _wait(client, job_id, deadline, len(job_ids) - index)
        if job is None:
            await client.cancel_many(job_ids[index:])
            waited = "the --timeout ran out before it finished (it was cancelled)"
            outcomes.extend(Outcome(rest, "timed_out", None, waited, None) for rest in job_ids[index:])
            break
        outcomes.append(Outcome(job.id, job.status.value, job.translation, job.error, job.quality_flags))
        if progress is not None:
            progress(index + 1, len(job_ids))
    return outcomes


async def _wait(client: AsyncClient, job_id: str, deadline: float, unfinished: int) -> Job | None:
    """The finished job, or None past the deadline; NoLiveWorkerError if it waits for a model nobody serves now."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            return await client.wait(job_id, timeout=min(remaining, _WAIT_SLICE_S))
        except JobTimeoutError:
            job = await client.get(job_id)
            if job.waiting_for is not None:
                raise NoLiveWorkerError(
                    f"{job.waiting_for}; {unfinished} job(s) of this evaluation are still queued (they run when "
                    "a worker starts, or `dragoman cancel` them)"
                ) from None


async def translate(
    client: AsyncClient,
    segments: Sequence[Segment],
    models: Sequence[str | None],
    deadline: float,
    progress: Progress | None = None,
) -> list[list[Outcome]]:
    """Every segment translated by each of ``models`` (None: the deployment's routes), in order, model by model.

    The live workers are checked first; then every model's jobs are submitted at once (the models'
    workers run side by side) and waited for.
    """
    await check_live_workers(client, segments, models)
    submitted = [await submit(client, segments, model) for model in models]
    total = sum(len(ids) for ids in submitted)
    done = 0

    def counted(finished: int, _total: int) -> None:
        if progress is not None:
            progress(done + finished, total)

    results: list[list[Outcome]] = []
    for ids in submitted:
        results.append(await collect(client, ids, deadline, counted))
        done += len(ids)
    return results
