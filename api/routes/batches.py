"""OpenAI's ``/v1/batches``: create, retrieve, list (``after``, ``limit``), cancel; a batch is a run of jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.auth import CallerDep
from api.json_body import JsonBodyRoute
from api.openai_schemas import BatchCreate, BatchList, BatchObject
from api.services import ApiServices, services

router = APIRouter(prefix="/v1/batches", tags=["OpenAI Batch API"], route_class=JsonBodyRoute)
ServicesDep = Annotated[ApiServices, Depends(services)]


@router.post("", response_model=BatchObject)
async def create_batch(body: BatchCreate, caller: CallerDep, api: ServicesDep) -> BatchObject:
    """Validate the input file's every line, then enqueue one job per line.

    The answer is the batch ``in_progress``, or ``failed`` with every bad line in ``errors``
    (nothing enqueued then), or if its lines would take the key past its limit of unfinished
    jobs (``queued_job_limit_exceeded``, as OpenAI fails a batch past its enqueued-token limit).
    """
    row = await api.batches.create(
        caller.tenant,
        input_file_id=body.input_file_id,
        endpoint=body.endpoint,
        completion_window=body.completion_window,
        metadata=body.metadata,
        max_queued_jobs=caller.max_queued_jobs,
    )
    return BatchObject.of(row)


@router.get("", response_model=BatchList)
async def list_batches(
    caller: CallerDep,
    api: ServicesDep,
    after: Annotated[str | None, Query(description="a batch id: the page starts after it")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> BatchList:
    """The caller's batches, newest first, a page of ``limit`` after ``after``."""
    found = await api.batches.list(caller.tenant, after=after, limit=limit + 1)
    page = [BatchObject.of(row) for row in found[:limit]]
    return BatchList(
        data=page,
        first_id=page[0].id if page else None,
        last_id=page[-1].id if page else None,
        has_more=len(found) > limit,
    )


@router.get("/{batch_id}", response_model=BatchObject)
async def retrieve_batch(batch_id: str, caller: CallerDep, api: ServicesDep) -> BatchObject:
    """The batch with its status and request counts; its output files once it is completed."""
    return BatchObject.of(await api.batches.get(caller.tenant, batch_id))


@router.post("/{batch_id}/cancel", response_model=BatchObject)
async def cancel_batch(batch_id: str, caller: CallerDep, api: ServicesDep) -> BatchObject:
    """Cancel the batch's unfinished requests: ``cancelling``, then ``cancelled`` with what did finish."""
    return BatchObject.of(await api.batches.cancel(caller.tenant, batch_id))
