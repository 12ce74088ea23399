"""The OpenAI Batch API's objects on the wire: files, batches, their lists, and the create request.

Field names, types and status values are OpenAI's, so the official SDKs parse them unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storage import BatchRow, StoredFile
from tenancy.batches import unix


class FileObject(BaseModel):
    """A stored file (``object: "file"``)."""

    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None

    @classmethod
    def of(cls, stored: StoredFile) -> FileObject:
        """The wire object of a stored file."""
        return cls(
            id=stored.id,
            bytes=stored.bytes,
            created_at=unix(stored.created_at) or 0,
            filename=stored.filename,
            purpose=stored.purpose,
        )


class FileList(BaseModel):
    """A page of files."""

    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class FileDeleted(BaseModel):
    """The answer to a delete."""

    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


class BatchCreate(BaseModel):
    """``POST /v1/batches``."""

    model_config = ConfigDict(extra="ignore")

    input_file_id: str
    endpoint: str
    completion_window: str = "24h"
    metadata: dict[str, Any] | None = None


class RequestCounts(BaseModel):
    """How many of a batch's requests there are, and how many completed or failed so far."""

    total: int
    completed: int
    failed: int


class BatchError(BaseModel):
    """One reason a batch failed validation: a bad line (``line``) or the file as a whole."""

    code: str | None = None
    message: str | None = None
    param: str | None = None
    line: int | None = None


class BatchErrors(BaseModel):
    """A failed batch's errors."""

    object: Literal["list"] = "list"
    data: list[BatchError] = Field(default_factory=list)


class BatchObject(BaseModel):
    """A batch (``object: "batch"``) with OpenAI's fields and status values."""

    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: Literal[
        "validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"
    ]
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: RequestCounts
    metadata: dict[str, str] | None = None

    @classmethod
    def of(cls, row: BatchRow) -> BatchObject:
        """The wire object of a batch row."""
        return cls(
            id=row.id,
            endpoint=row.endpoint,
            errors=None if row.errors is None else BatchErrors(data=[BatchError(**e) for e in row.errors]),
            input_file_id=row.input_file_id,
            completion_window=row.completion_window,
            status=row.status,
            output_file_id=row.output_file_id,
            error_file_id=row.error_file_id,
            created_at=unix(row.created_at) or 0,
            in_progress_at=unix(row.in_progress_at),
            expires_at=unix(row.expires_at),
            finalizing_at=unix(row.finalizing_at),
            completed_at=unix(row.completed_at),
            failed_at=unix(row.failed_at),
            expired_at=unix(row.expired_at),
            cancelling_at=unix(row.cancelling_at),
            cancelled_at=unix(row.cancelled_at),
            request_counts=RequestCounts(total=row.total, completed=row.completed, failed=row.failed),
            metadata=row.metadata,
        )


class BatchList(BaseModel):
    """A page of batches, newest first."""

    object: Literal["list"] = "list"
    data: list[BatchObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
