"""OpenAI's ``/v1/files``: upload (multipart, spooled, then streamed into the file store), list, retrieve,
content, delete.

The multipart body is spooled by Starlette (memory, then a temporary file) before the route runs,
under the API's body deadlines (:mod:`api.body_timeout`): the file store's connection is taken
only once every byte has arrived, to write them. The size is then known, so the tenant's quota is
checked (and the bytes reserved) before anything is stored.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import StreamingResponse

from api.auth import CallerDep
from api.errors import ApiError
from api.openai_schemas import FileDeleted, FileList, FileObject
from api.services import ApiServices, services
from api.uploads import spooled_chunks
from storage import LineTooLongError, Quota, StoredFile
from tenancy.batches import BatchFileNotFoundError

router = APIRouter(prefix="/v1/files", tags=["OpenAI Batch API"])
ServicesDep = Annotated[ApiServices, Depends(services)]

PURPOSES = ("batch",)
"""What an upload may be for (``batch_output`` files are the server's own)."""
_READ_BYTES = 1024 * 1024
MIN_EXPIRY_SECONDS = 3_600
MAX_EXPIRY_SECONDS = 30 * 86_400
"""``expires_after[seconds]`` bounds, OpenAI's: one hour to 30 days."""


def checked_text(value: str | None, param: str) -> str | None:
    """``value`` if PostgreSQL can hold it; a NUL or a lone surrogate (from a %-escape) is a 400 naming ``param``."""
    if value is None:
        return None
    if "\x00" in value:
        raise ApiError(400, "invalid_value", f"{param} must not contain NUL characters", param=param)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "invalid_value", f"{param} is not valid UTF-8 text", param=param) from None
    return value


def _expiry(anchor: str | None, seconds: str | None, purpose: str, default: int) -> int | None:
    """Seconds until the upload expires (None: never), from ``expires_after`` or the default for batch files."""
    if anchor is None and seconds is None:
        return default if purpose == "batch" and default > 0 else None
    if anchor != "created_at":
        raise ApiError(
            400,
            "invalid_value",
            f'expires_after[anchor] must be "created_at", got {anchor!r}',
            param="expires_after[anchor]",
        )
    try:
        value = int(seconds or "")
    except ValueError:
        value = -1
    if not MIN_EXPIRY_SECONDS <= value <= MAX_EXPIRY_SECONDS:
        raise ApiError(
            400,
            "invalid_value",
            f"expires_after[seconds] must be an integer from {MIN_EXPIRY_SECONDS} to {MAX_EXPIRY_SECONDS}, "
            f"got {seconds!r}",
            param="expires_after[seconds]",
        )
    return value


async def _size(upload: UploadFile) -> int:
    """The spooled upload's size in bytes."""
    if upload.size is not None:
        return upload.size
    size = 0
    await upload.seek(0)
    while piece := await upload.read(_READ_BYTES):
        size += len(piece)
    return size


@router.post("", response_model=FileObject)
async def upload_file(
    caller: CallerDep,
    api: ServicesDep,
    file: Annotated[UploadFile, File(description="the JSONL input of a batch")],
    purpose: Annotated[str, Form(description='"batch"')],
    expires_after_anchor: Annotated[str | None, Form(alias="expires_after[anchor]", description='"created_at"')] = None,
    expires_after_seconds: Annotated[
        str | None, Form(alias="expires_after[seconds]", description="3600 to 2592000")
    ] = None,
) -> FileObject:
    """Store an uploaded file (at most ``DRAGOMAN_MAX_FILE_BYTES``), read into the store a chunk at a time.

    Refused before anything is stored: past the tenant's ``DRAGOMAN_FILE_QUOTA_BYTES`` (``413
    file_quota_exceeded``), a line over ``DRAGOMAN_MAX_JSONL_LINE_BYTES`` (``400 line_too_long``,
    naming it). ``expires_after`` (``anchor=created_at``, ``seconds``) sets ``expires_at``; a batch
    file naming none expires after ``DRAGOMAN_FILE_EXPIRY_SECONDS``. An expired file is 404.
    """
    if purpose not in PURPOSES:
        raise ApiError(400, "invalid_purpose", f'purpose must be "batch", got {purpose!r}', param="purpose")
    filename = checked_text(file.filename, "file") or "upload.jsonl"
    expires = _expiry(expires_after_anchor, expires_after_seconds, purpose, api.settings.file_expiry_seconds)
    settings = api.settings
    try:
        stored = await api.files.create(
            caller.tenant,
            purpose,
            filename,
            spooled_chunks(file),
            max_bytes=settings.max_file_bytes,
            quota=Quota(settings.file_quota_bytes, await _size(file)),
            expires_after_seconds=expires,
            max_line_bytes=settings.max_jsonl_line_bytes,
        )
    except LineTooLongError as exc:
        raise ApiError(400, "line_too_long", str(exc), param="file") from None
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
    after, purpose = checked_text(after, "after"), checked_text(purpose, "purpose")
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
    checked_text(file_id, "file_id")
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
            "Content-Disposition": content_disposition(stored.filename),
        },
    )


_ATTR_CHARS = "!#$&+-.^_`|~"
"""RFC 5987 ``attr-char``s besides letters and digits: left as they are in ``filename*``."""


def content_disposition(filename: str) -> str:
    """``attachment`` with the name twice: an ASCII ``filename`` (other characters as ``_``) for old clients,
    and RFC 5987's ``filename*=UTF-8''...`` with the exact name for every client that reads it.

    A header is Latin-1 on the wire: a name outside it, sent as it is, cannot be written at all.
    """
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in filename) or "download"
    exact = quote(filename.encode("utf-8", "replace"), safe=_ATTR_CHARS)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{exact}"


@router.delete("/{file_id}", response_model=FileDeleted)
async def delete_file(file_id: str, caller: CallerDep, api: ServicesDep) -> FileDeleted:
    """Delete one of the caller's files and its bytes; ``409 file_in_use`` while a batch being validated
    reads it (or it is a run's upload being queued)."""
    checked_text(file_id, "file_id")
    if not await api.files.delete(caller.tenant, file_id):
        raise BatchFileNotFoundError(f"no file with id {file_id!r}")
    return FileDeleted(id=file_id)
