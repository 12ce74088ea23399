"""The OpenAI API's objects on the wire: files, batches, their lists, the create request, and models.

Field names, types and status values are OpenAI's, so the official SDKs parse them unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from producer.model_catalog import LiveWorker, ServedModel
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
            expires_at=unix(stored.expires_at),
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
    """How many of a batch's requests there are, and how many completed or failed so far.

    ``flagged`` and ``flags`` are dragoman's extension (the ``openai`` SDK keeps unknown fields:
    ``batch.request_counts.flagged``): ``null`` where a read did not count them (a final batch in a list).
    """

    total: int
    completed: int
    failed: int
    flagged: int | None = Field(
        default=None,
        description="dragoman: completed /v1/translations requests whose quality checks found something "
        "(chat and completion requests are never checked); null where not counted (final batches in a list)",
    )
    flags: dict[str, int] | None = Field(
        default=None, description="dragoman: flagged requests per quality flag (only the flags that occur)"
    )


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
            request_counts=RequestCounts(
                total=row.total, completed=row.completed, failed=row.failed, flagged=row.flagged, flags=row.flags
            ),
            metadata=row.metadata,
        )


class BatchList(BaseModel):
    """A page of batches, newest first."""

    object: Literal["list"] = "list"
    data: list[BatchObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class ModelRouteView(BaseModel):
    """A routing rule that sends jobs naming no model to this model (``DRAGOMAN_MODEL_ROUTES``)."""

    source: str = Field(description="pattern of the source language code")
    target: str = Field(description="pattern of the target language code")
    lane: str | None = Field(default=None, description="only jobs of this lane; null: every lane")


class ModelWorker(BaseModel):
    """A live worker process serving the model (one engine; each engine of an engine group is one)."""

    name: str = Field(description="its consumer name")
    served_names: list[str] = Field(description="the names it serves, the model first")
    in_flight: int | None = Field(default=None, description="jobs it holds now")
    lane_policy: str | None = None
    engine: str | None = Field(default=None, description="its engine's settings, where the heartbeat carries them")
    profile: str | None = Field(default=None, description="its prompt profile")
    model_path: str | None = Field(default=None, description="the weights it loaded")
    started_at: float | None = Field(default=None, description="unix seconds")

    @classmethod
    def of(cls, worker: LiveWorker) -> ModelWorker:
        """The wire view of a live worker's heartbeat."""
        fields = worker.fields
        return cls(
            name=worker.name,
            served_names=list(worker.models),
            in_flight=_int(fields.get("in_flight")),
            lane_policy=fields.get("lane_policy") or None,
            engine=fields.get("engine") or None,
            profile=fields.get("profile") or None,
            model_path=fields.get("model_path") or None,
            started_at=_number(fields.get("started_at")),
        )


class ModelObject(BaseModel):
    """A served model (``object: "model"``): OpenAI's fields, then dragoman's."""

    id: str = Field(description="the model's name: what a job's model names (or one of its aliases)")
    object: Literal["model"] = "model"
    created: int = Field(description="unix seconds its longest-running live worker started; 0 with none live")
    owned_by: str = "dragoman"
    aliases: list[str] = Field(description="other names that reach it (a worker's further --served-model-name)")
    default: bool = Field(description="jobs naming no model and matching no route go to it (DRAGOMAN_DEFAULT_MODEL)")
    routes: list[ModelRouteView] = Field(description="the routing rules that send jobs naming no model to it")
    engines: int = Field(description="live engines serving it (one per live worker process)")
    workers: list[ModelWorker] = Field(description="its live workers; none: its jobs wait for one")
    profile: str | None = Field(default=None, description="the prompt profile its live workers report")
    model_path: str | None = Field(default=None, description="the weights its live workers report")

    @classmethod
    def of(cls, model: ServedModel) -> ModelObject:
        """The wire object of a served model."""
        return cls(
            id=model.id,
            created=model.created,
            aliases=list(model.aliases),
            default=model.default,
            routes=[
                ModelRouteView(
                    source=rule.source, target=rule.target, lane=None if rule.lane is None else rule.lane.value
                )
                for rule in model.routes
            ],
            engines=len(model.workers),
            workers=[ModelWorker.of(worker) for worker in model.workers],
            profile=model.reported("profile"),
            model_path=model.reported("model_path"),
        )


class ModelList(BaseModel):
    """``GET /v1/models``: every served model, the default first."""

    object: Literal["list"] = "list"
    data: list[ModelObject]


def _number(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None else int(number)
