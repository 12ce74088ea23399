"""Native runs: upload a JSONL run (streamed), follow it, stream its results in input order, cancel it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, status
from fastapi.responses import StreamingResponse

from api.auth import CallerDep
from api.errors import ApiError
from api.schemas import ErrorBody, GroupView
from api.services import ApiServices, services
from api.uploads import spool, spooled_chunks
from contract.flag_filter import parse_flag_filter
from contract.quality import UnknownQualityFlagError

router = APIRouter(prefix="/v1/runs", tags=["runs"])

ServicesDep = Annotated[ApiServices, Depends(services)]
_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 429, 503)
}
_JSONL_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": 'one JSON object a line: {"custom_id": ..., "text": ...} and optionally source_lang, '
        "target_lang (else the query's) and metadata",
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    }
}


@router.post(
    "", status_code=status.HTTP_202_ACCEPTED, response_model=GroupView, responses=_ERRORS, openapi_extra=_JSONL_BODY
)
async def submit_run(
    request: Request,
    caller: CallerDep,
    api: ServicesDep,
    source_lang: Annotated[
        str | None,
        Query(description='language of lines that name none, or "auto": each such line\'s job detects its own'),
    ] = None,
    target_lang: Annotated[str | None, Query(description="target of lines that name none")] = None,
    name: Annotated[str | None, Query(max_length=256, description="a label for the run")] = None,
    callback_url: Annotated[str | None, Query(description="POSTed (signed) when the run finishes")] = None,
    model: Annotated[
        str | None,
        Query(description="the served model of lines that name none (GET /v1/models); none: the routes choose"),
    ] = None,
) -> GroupView:
    """Queue a JSONL run: ``202`` with the run once every line is queued.

    The body streams into storage (at most ``DRAGOMAN_MAX_FILE_BYTES``); every line is checked
    before any is queued, and a bad file is refused with each bad line named (``422
    invalid_run_file``); a run that would take the key past its limit of unfinished jobs is
    ``429 too_many_queued_jobs`` (``Retry-After``). Job ids derive from the run id and the line's position.
    The body is spooled before it is stored (no database connection waits on the client; a body
    that stalls past ``DRAGOMAN_UPLOAD_READ_TIMEOUT_SECONDS`` is ``408``, nothing stored); past the
    tenant's ``DRAGOMAN_FILE_QUOTA_BYTES`` it is ``413 file_quota_exceeded``, and a line over
    ``DRAGOMAN_MAX_JSONL_LINE_BYTES`` is ``422 invalid_run_file`` naming it.
    A line's ``model`` (else ``?model=``, else the routes) is its job's; a model nobody serves is ``404
    model_not_found``, nothing queued.
    """
    upload = await spool(request.stream(), api.settings.upload_memory_bytes)
    try:
        progress = await api.groups.submit_run(
            caller.tenant,
            spooled_chunks(upload),
            source_lang=source_lang,
            target_lang=target_lang,
            name=name,
            callback_url=callback_url,
            max_queued_jobs=caller.max_queued_jobs,
            model=model,
            size=upload.size,
        )
    finally:
        await upload.close()
    return GroupView.of(progress)


@router.get("/{run_id}", response_model=GroupView, responses=_ERRORS)
async def get_run(run_id: str, caller: CallerDep, api: ServicesDep) -> GroupView:
    """The run: status, counts per status, percent done, jobs per second and seconds left."""
    return GroupView.of(await api.groups.progress(caller.tenant, "run", run_id))


@router.get(
    "/{run_id}/results",
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "one line per input line"}, **_ERRORS},
    response_class=StreamingResponse,
)
async def run_results(
    run_id: str,
    caller: CallerDep,
    api: ServicesDep,
    partial: Annotated[bool, Query(description="stream the lines of finished jobs while others are pending")] = False,
    flagged: Annotated[
        str | None,
        Query(
            description="true: only the lines of jobs whose quality checks found something; flag names "
            "(comma-separated, e.g. numbers,wrong_language): only those with any of them; false: every line"
        ),
    ] = None,
) -> StreamingResponse:
    """The results as JSONL in input order: ``custom_id``, ``status``, ``translation`` or ``error``, ``metadata``,
    and ``quality_flags`` (``{flag: evidence}``, ``{}`` when clean) for a checked translation.

    ``409 run_not_finished`` while jobs are pending, unless ``?partial=true``; ``400 invalid_flagged`` for a
    ``flagged`` that is neither true/false nor flag names.
    """
    try:
        chosen = parse_flag_filter(flagged)
    except UnknownQualityFlagError as exc:
        raise ApiError(400, "invalid_flagged", f"flagged must be true, false or quality flag names: {exc}") from None
    lines = await api.groups.iter_results(caller.tenant, run_id, allow_partial=partial, flagged=chosen)

    async def body() -> AsyncIterator[bytes]:
        async for line in lines:
            yield json.dumps(line, ensure_ascii=False).encode() + b"\n"

    return StreamingResponse(body(), media_type="application/x-ndjson")


@router.post("/{run_id}/cancel", response_model=GroupView, responses=_ERRORS)
async def cancel_run(run_id: str, caller: CallerDep, api: ServicesDep) -> GroupView:
    """Cancel every job of the run that has not finished; the run ends ``cancelled``."""
    return GroupView.of(await api.groups.cancel(caller.tenant, "run", run_id))
