"""The tenant's history (the web console's lists) and retries: ``GET /v1/jobs``, ``/v1/runs``, ``/v1/documents``,
``POST /v1/jobs/{id}/retry``, ``POST /v1/documents/{id}/retry``.

Each list is the calling key's tenant's own, newest first, a page at a time: ``limit`` items (20 by
default, at most 100) and ``next``, the ``before=`` that reads the following (older) page, null on
the last. The cursor is opaque; another tenant's rows are never listed. Batches list at
``GET /v1/batches`` (OpenAI's shape).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, status

from api.auth import CallerDep
from api.errors import ApiError
from api.schemas import DocumentPage, DocumentSummary, ErrorBody, GroupPage, GroupView, JobAccepted, JobPage, JobView
from api.services import ApiServices, services
from api.text_translation import submit_admitted
from contract.errors import ModelNotFoundError
from contract.schemas import Job, JobStatus
from producer.requests import parse_job_id, prepare
from storage.history import InvalidCursorError, PageCursor, decode_cursor, encode_cursor
from tenancy.history import NotRetryableError, Page, TenantHistory

router = APIRouter()

ServicesDep = Annotated[ApiServices, Depends(services)]
_ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorBody} for code in (400, 401, 404, 409, 429, 503)}
LimitQuery = Annotated[int, Query(ge=1, le=100, description="items on the page (at most 100)")]
BeforeQuery = Annotated[
    str | None, Query(max_length=200, description="the 'next' of the previous page; none: the newest")
]


async def tenant_history(request: Request) -> TenantHistory:
    """The application's :class:`TenantHistory` (a FastAPI dependency)."""
    history: TenantHistory = request.app.state.history
    return history


HistoryDep = Annotated[TenantHistory, Depends(tenant_history)]


def _cursor(before: str | None) -> PageCursor | None:
    """The page's starting cursor; ``400 invalid_cursor`` for one no list handed out."""
    if before is None or before == "":
        return None
    try:
        return decode_cursor(before)
    except InvalidCursorError as exc:
        raise ApiError(400, "invalid_cursor", str(exc)) from None


def _next(page: Page) -> str | None:
    return None if page.next is None else encode_cursor(page.next)


@router.get("/v1/jobs", tags=["jobs"], response_model=JobPage, responses=_ERRORS)
async def list_jobs(
    caller: CallerDep, api: ServicesDep, history: HistoryDep, limit: LimitQuery = 20, before: BeforeQuery = None
) -> JobPage:
    """The tenant's stand-alone jobs (not a run's or document's), newest first: queued, running and finished.

    A job's row reaches PostgreSQL when it finishes; queued and running jobs are read from Redis, where
    the submitter notes each stand-alone job of a tenant until it has finished, and merged into the
    same order. A finished job is listed for as long as its row is kept. A DeepL or LibreTranslate job's text and
    translation are shown with the client's markup (the placeholder tags it was queued with put back).
    """
    page = await history.jobs(caller.tenant, _cursor(before), limit)
    views = await api.work.run(_views, page.items)  # a page of long texts' markup put back: not the loop's work
    return JobPage(data=views, next=_next(page))


def _views(jobs: list[Job]) -> list[JobView]:
    """The public views of ``jobs``."""
    return [JobView.of(job) for job in jobs]


@router.get("/v1/runs", tags=["runs"], response_model=GroupPage, responses=_ERRORS)
async def list_runs(
    caller: CallerDep, history: HistoryDep, limit: LimitQuery = 20, before: BeforeQuery = None
) -> GroupPage:
    """The tenant's runs, newest first, each with its status and counts as ``GET /v1/runs/{id}`` gives them."""
    page = await history.groups("run", caller.tenant, _cursor(before), limit)
    return GroupPage(data=[GroupView.of(entry.progress) for entry in page.items], next=_next(page))


@router.get("/v1/documents", tags=["documents"], response_model=DocumentPage, responses=_ERRORS)
async def list_documents(
    caller: CallerDep, history: HistoryDep, limit: LimitQuery = 20, before: BeforeQuery = None
) -> DocumentPage:
    """The tenant's documents, newest first: status, counts, ``name`` (the filename given) and ``format``."""
    page = await history.groups("document", caller.tenant, _cursor(before), limit)
    return DocumentPage(
        data=[DocumentSummary(**GroupView.of(e.progress).model_dump(), format=e.format or "") for e in page.items],
        next=_next(page),
    )


@router.post(
    "/v1/jobs/{job_id}/retry",
    tags=["jobs"],
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses=_ERRORS,
)
async def retry_job(job_id: str, caller: CallerDep, api: ServicesDep, history: HistoryDep) -> JobAccepted:
    """Submit a failed or cancelled stand-alone job again, as a new job: ``202`` with the new job's id.

    The new job has the same text, languages, metadata and controls (glossary, context, formality,
    memory, lane) and goes to the model that handled the first (the routes choose if that one is no
    longer served). It counts against the key's limit of unfinished jobs like any job (``429``).
    A job is retried once: asking again (a double click, two tabs) answers that retry's id and status.
    ``409 not_retryable`` for a queued, running or succeeded job, or one of a run or document.
    """
    job_id = parse_job_id(job_id)
    live = await api.client.get(job_id, tenant=caller.tenant)
    try:
        request = await history.job_retry(caller.tenant, job_id, live)
    except NotRetryableError as exc:
        raise ApiError(409, "not_retryable", str(exc)) from None
    try:
        (new_id,) = await submit_admitted(api, caller, [prepare(api.settings, request, tenant=caller.tenant)])
    except ModelNotFoundError:
        if request.model is None:
            raise
        unrouted = prepare(api.settings, dataclasses.replace(request, model=None), tenant=caller.tenant)
        (new_id,) = await submit_admitted(api, caller, [unrouted])
    # a job already retried answers its earlier retry (the idempotency key), which may have finished since
    retried = await api.client.get(new_id, tenant=caller.tenant)
    finished = retried.status not in (JobStatus.QUEUED, JobStatus.RUNNING)
    return JobAccepted(id=new_id, status=retried.status if finished else JobStatus.QUEUED)


@router.post(
    "/v1/documents/{document_id}/retry",
    tags=["documents"],
    status_code=status.HTTP_202_ACCEPTED,
    response_model=GroupView,
    responses=_ERRORS,
)
async def retry_document(document_id: str, caller: CallerDep, api: ServicesDep, history: HistoryDep) -> GroupView:
    """Submit a document that failed, was cancelled or has failed segments again, as a new document: ``202`` with it.

    The new document is translated from the stored source with the same languages, format, name,
    options (segment length, retranslate, model, glossary, context, formality) and callback. It is
    admitted like any document (``429`` with the key at its limit of unfinished jobs). ``409
    not_retryable`` for one still splitting or running, or completed with no failed segment.
    """
    try:
        new_id = await history.retry_document(caller.tenant, document_id, api.groups, caller.max_queued_jobs)
    except NotRetryableError as exc:
        raise ApiError(409, "not_retryable", str(exc)) from None
    return GroupView.of(await api.groups.progress(caller.tenant, "document", new_id))
