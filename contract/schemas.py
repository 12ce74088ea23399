"""What a job is: its status model, the validated submission, and the view returned by lookups."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import msgspec
from pydantic import BaseModel, ConfigDict

from contract.errors import EmptyTextError, InvalidJobError, InvalidMetadataError, TextTooLongError
from contract.languages import normalize_language


class JobStatus(StrEnum):
    """``queued -> running -> succeeded | failed | cancelled``."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        """Final statuses live in PostgreSQL; the others only in the Redis state record."""
        return self in _FINAL


_FINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


@dataclass(frozen=True, slots=True)
class TranslationRequest:
    """One item for :meth:`producer.Client.submit_many` (a plain dict with these keys works too)."""

    text: str
    source_lang: str
    target_lang: str
    metadata: dict[str, Any] | None = None
    idempotency_key: str | None = None


class JobSpec(msgspec.Struct, frozen=True):
    """A validated job: exactly what travels in a stream entry's payload.

    A frozen ``msgspec.Struct`` rather than a frozen dataclass: the worker builds one per job,
    and a frozen dataclass's ``__init__`` cost about 2 µs of its ~100 µs per job.
    ``msgspec.structs.replace`` derives a changed copy.
    """

    job_id: str
    text: str
    source_lang: str
    target_lang: str
    created_at: float
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    run_id: str | None = None
    document_id: str | None = None
    sequence: int | None = None


def validate_text(text: object, max_chars: int) -> str:
    """Return ``text`` if it is a non-blank string within ``max_chars``; raise a typed error otherwise."""
    if not isinstance(text, str):
        raise EmptyTextError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise EmptyTextError("text is empty or only whitespace; there is nothing to translate")
    if "\x00" in text:
        raise InvalidJobError("text contains a NUL character (\\x00), which cannot be stored; remove it")
    if len(text) > max_chars:
        raise TextTooLongError(
            f"text has {len(text):,} characters, over the limit of {max_chars:,} "
            "(DRAGOMAN_MAX_TEXT_CHARS); split it, or submit it as a document"
        )
    return text


def validate_metadata(metadata: object) -> dict[str, Any]:
    """Return ``metadata`` as a dict if it is a JSON object with string keys; raise otherwise."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidMetadataError(f"metadata must be a dict, got {type(metadata).__name__}")
    flat = True
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise InvalidMetadataError(f"metadata keys must be strings, got {key!r}")
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidMetadataError("metadata contains a NUL character (\\u0000), which cannot be stored")
        elif not (
            value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value))
        ):
            flat = False
    if flat:  # the common case needs no trial encoding
        return metadata
    try:
        encoded = json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMetadataError(
            f"metadata must be JSON-serialisable (strings, numbers, booleans, null, lists, dicts): {exc}"
        ) from None
    if "\\u0000" in encoded:
        raise InvalidMetadataError("metadata contains a NUL character (\\u0000), which cannot be stored")
    return metadata


def build_job_spec(
    job_id: str,
    text: object,
    source_lang: str,
    target_lang: str,
    *,
    max_chars: int,
    metadata: object = None,
    created_at: float | None = None,
) -> JobSpec:
    """Validate one submission and return its :class:`JobSpec`; nothing is written here."""
    source = normalize_language(source_lang)
    target = normalize_language(target_lang)
    return JobSpec(
        job_id=job_id,
        text=validate_text(text, max_chars),
        source_lang=source,
        target_lang=target,
        created_at=datetime.now(UTC).timestamp() if created_at is None else created_at,
        metadata=validate_metadata(metadata),
    )


class Job(BaseModel):
    """What a lookup by id returns: status, result, error and timings."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: JobStatus
    source_lang: str | None = None
    target_lang: str | None = None
    text: str | None = None
    translation: str | None = None
    error: str | None = None
    attempts: int = 0
    model: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    metadata: dict[str, Any] = {}
    run_id: str | None = None
    document_id: str | None = None
    sequence: int | None = None

    @property
    def queue_seconds(self) -> float | None:
        """Time between submit and the worker starting the job."""
        return _seconds_between(self.created_at, self.started_at)

    @property
    def run_seconds(self) -> float | None:
        """Time the worker spent on the job."""
        return _seconds_between(self.started_at, self.finished_at)

    @property
    def total_seconds(self) -> float | None:
        """Time between submit and the final status."""
        return _seconds_between(self.created_at, self.finished_at)


def _seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    seconds = (end - start).total_seconds()
    return seconds if math.isfinite(seconds) else None


def timestamp_to_datetime(value: float | str | bytes | None) -> datetime | None:
    """Unix seconds (as stored in Redis) to an aware UTC datetime."""
    if value is None or value == "" or value == b"":
        return None
    return datetime.fromtimestamp(float(value), tz=UTC)
