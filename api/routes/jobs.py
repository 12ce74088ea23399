"""Native jobs: ``POST /v1/jobs`` (one or a list, optional bounded wait), ``GET /v1/jobs/{id}``, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Response, status

from api.auth import CallerDep
from api.errors import ApiError
from api.json_body import JsonBodyRoute
from api.schemas import ErrorBody, JobAccepted, JobRequest, JobsAccepted, JobView
from api.services import ApiServices, services
from api.source_hints import with_source_hints
from api.text_translation import submit_admitted
from contract.errors import JobTimeoutError
from contract.schemas import JobStatus, TranslationRequest
from producer.requests import prepare, prepare_many

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=JsonBodyRoute)

ServicesDep = Annotated[ApiServices, Depends(services)]
_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 429, 503)
}


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted | JobsAccepted | JobView,
    responses={200: {"model": JobView, "description": "finished within ?wait="}, **_ERRORS},
)
async def submit_jobs(
    caller: CallerDep,
    api: ServicesDep,
    response: Response,
    body: Annotated[JobRequest | list[JobRequest], Body()],
    wait: Annotated[
        float | None,
        Query(
            ge=0,
            allow_inf_nan=False,
            description="seconds to wait for one job to finish (capped by DRAGOMAN_API_MAX_WAIT_SECONDS)",
        ),
    ] = None,
) -> JobAccepted | JobsAccepted | JobView:
    """Enqueue one job (an object) or several (a list, pipelined): ``202`` with the id(s).

    Every job is validated before anything is written; one bad item refuses the whole list,
    naming its index. Jobs that would take the key past its limit of unfinished jobs are ``429
    too_many_queued_jobs`` with ``Retry-After``. With ``?wait=SECONDS`` (one job only), the answer is ``200`` with the
    finished job if it finishes in time, else the same ``202``. ``source_lang: auto`` with ``detection: best_guess``
    never fails a job for a text too short to tell (the list's other texts, the key's recent languages and the
    default language help); the default, ``strict``, fails it as before.
    """
    client = api.client
    if isinstance(body, list):
        if wait is not None:
            raise ApiError(422, "invalid_request", "wait= applies to one job; poll GET /v1/jobs/{id} for a list")
        if not body:
            raise ApiError(422, "invalid_request", "the list of jobs is empty")
        limit = api.settings.api_max_jobs_per_request
        if len(body) > limit:
            raise ApiError(422, "too_many_jobs", f"{len(body):,} jobs in one request, over the limit of {limit:,}")
        requests = [TranslationRequest(**item.model_dump()) for item in body]
        requests = await with_source_hints(api, caller.tenant, requests, [_best_guess(item) for item in body])
        prepared = prepare_many(client.settings, requests, tenant=caller.tenant)
        return JobsAccepted(ids=await submit_admitted(api, caller, prepared))
    (request,) = await with_source_hints(
        api, caller.tenant, [TranslationRequest(**body.model_dump())], [_best_guess(body)]
    )
    one = prepare(client.settings, request, tenant=caller.tenant)
    (job_id,) = await submit_admitted(api, caller, [one])
    if wait:
        try:
            job = await client.wait(job_id, timeout=min(wait, api.settings.api_max_wait_seconds), tenant=caller.tenant)
        except JobTimeoutError:
            pass
        else:
            response.status_code = status.HTTP_200_OK
            return JobView.of(job)
    if body.idempotency_key is None:
        return JobAccepted(id=job_id, status=JobStatus.QUEUED)
    job = await client.get(job_id, tenant=caller.tenant)  # the key may name an earlier job, maybe finished
    if job.status.is_final:
        response.status_code = status.HTTP_200_OK
        return JobView.of(job)
    return JobAccepted(id=job_id, status=job.status)


def _best_guess(request: JobRequest) -> bool:
    """Whether ``request`` asked for a best guess of its source language rather than a strict detection."""
    return request.detection == "best_guess"


@router.get("/{job_id}", response_model=JobView, responses=_ERRORS)
async def get_job(job_id: str, caller: CallerDep, api: ServicesDep) -> JobView:
    """A job: status, translation or error, attempts, timings, tokens, model. Another tenant's id is 404."""
    return JobView.of(await api.client.get(job_id, tenant=caller.tenant))


@router.post("/{job_id}/cancel", response_model=JobView, responses=_ERRORS)
async def cancel_job(job_id: str, caller: CallerDep, api: ServicesDep) -> JobView:
    """Cancel a queued job (at once) or a running one (its worker aborts it; it shows ``running`` until then).

    ``409 job_not_cancellable`` for a job that already succeeded or failed; cancelling a
    cancelled job is a no-op.
    """
    return JobView.of(await api.client.cancel(job_id, tenant=caller.tenant))
