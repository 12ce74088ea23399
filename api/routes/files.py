"""OpenAI's ``/v1/files``: upload (multipart, streamed into the file store), list, retrieve, content, delete."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import StreamingResponse

from api.auth import CallerDep
from api.errors import ApiError
from api.openai_schemas import FileDeleted, FileList, FileObject
from api.services import ApiServices, services
from storage import StoredFile
from tenancy.batches import BatchFileNotFoundError

router = APIRouter(prefix="/v1/files", tags=["OpenAI Batch API"])
ServicesDep = Annotated[ApiServices, Depends(services)]

PURPOSES = ("batch",)
"""What an upload may be for (``batch_output`` files are the server's own)."""
_READ_BYTES = 1024 * 1024


async def _upload_chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while piece := await upload.read(_READ_BYTES):
        yield piece


@router.post("", response_model=FileObject)
async def upload_file(
    caller: CallerDep,
    api: ServicesDep,
    file: Annotated[UploadFile, File(description="the JSONL input of a batch")],
    purpose: Annotated[str, Form(description='"batch"')],
) -> FileObject:
    """Store an uploaded file (at most ``DRAGOMAN_MAX_FILE_BYTES``), read into the store a chunk at a time."""
    if purpose not in PURPOSES:
        raise ApiError(400, "invalid_purpose", f'purpose must be "batch", got {purpose!r}', param="purpose")
    stored = await api.files.create(
        caller.tenant,
        purpose,
        file.filename or "upload.jsonl",
        _upload_chunks(file),
        max_bytes=api.settings.max_file_bytes,
    )
    return FileObject.of(stored)


@router.get("", response_model=FileList)
async def list_files(
    caller: CallerDep,
    api: ServicesDep,
    after: Annotated[str | None, Query(description="a file id: the page starts after it")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10_000,
    order: Annotated[Literal["asc", "desc"], Query()] = "desc",
    purpose: Annotated[str | None, Query()] = None,
) -> FileList:
    """The caller's files, newest first unless ``order=asc``, a page of ``limit`` after ``after``."""
    found = await api.files.list(
        caller.tenant, purpose=purpose, after=after, limit=limit + 1, descending=order == "desc"
    )
    page = [FileObject.of(stored) for stored in found[:limit]]
    return FileList(
        data=page,
        first_id=page[0].id if page else None,
        last_id=page[-1].id if page else None,
        has_more=len(found) > limit,
    )


async def _owned(api: ApiServices, tenant: str, file_id: str) -> StoredFile:
    stored = await api.files.get(tenant, file_id)
    if stored is None:
        raise BatchFileNotFoundError(f"no file with id {file_id!r}")
    return stored


@router.get("/{file_id}", response_model=FileObject)
async def retrieve_file(file_id: str, caller: CallerDep, api: ServicesDep) -> FileObject:
    """One of the caller's files; another tenant's id is 404."""
    return FileObject.of(await _owned(api, caller.tenant, file_id))


@router.get("/{file_id}/content", response_class=StreamingResponse)
async def file_content(file_id: str, caller: CallerDep, api: ServicesDep) -> StreamingResponse:
    """The file's bytes, streamed from the store a chunk at a time."""
    stored = await _owned(api, caller.tenant, file_id)
    return StreamingResponse(
        api.files.read(stored.id),
        media_type="application/octet-stream",
        headers={
            "Content-Length": str(stored.bytes),
            "Content-Disposition": f'attachment; filename="{stored.filename}"',
        },
    )


@router.delete("/{file_id}", response_model=FileDeleted)
async def delete_file(file_id: str, caller: CallerDep, api: ServicesDep) -> FileDeleted:
    """Delete one of the caller's files and its bytes."""
    if not await api.files.delete(caller.tenant, file_id):
        raise BatchFileNotFoundError(f"no file with id {file_id!r}")
    return FileDeleted(id=file_id)
