"""What a job is: its status model, the validated submission, and the view returned by lookups."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import msgspec
from pydantic import BaseModel, ConfigDict

from contract.controls import (
    AUTO_LANGUAGE,
    Formality,
    validate_context,
    validate_formality,
    validate_glossary,
    validate_memory,
)
from contract.errors import EmptyTextError, InvalidJobError, InvalidMetadataError, TextTooLongError, shown
from contract.language_detection import validate_source_hints
from contract.languages import normalize_language
from contract.model_names import validate_model_name


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


class Lane(StrEnum):
    """The lane a job waits in: ``interactive`` jobs reach the engine before ``bulk`` ones.

    Each lane is a stream of its own; workers read both with a weighted share, so bulk work is
    never starved (see ``worker.lanes``). A job that names none is interactive, unless it belongs
    to a run or a document, which are bulk (:func:`lane_of`).
    """

    INTERACTIVE = "interactive"
    BULK = "bulk"

    @property
    def engine_priority(self) -> int:
        """vLLM's request priority (lower runs first, under ``--scheduling-policy priority``)."""
        return 0 if self is Lane.INTERACTIVE else 1


def validate_lane(lane: object) -> Lane:
    """``lane`` as a :class:`Lane`; a typed error naming the choices otherwise."""
    try:
        return Lane(lane)  # type: ignore[arg-type]
    except ValueError:
        raise InvalidJobError(
            f"lane must be one of {', '.join(repr(choice.value) for choice in Lane)}, got {shown(lane)}"
        ) from None


def lane_of(spec: JobSpec) -> Lane:
    """The lane ``spec`` is queued in: its own, else bulk for a run's or document's job, else interactive."""
    if spec.lane is not None:
        return spec.lane
    return Lane.BULK if spec.run_id is not None or spec.document_id is not None else Lane.INTERACTIVE


@dataclass(frozen=True, slots=True)
class TranslationRequest:
    """One item for :meth:`producer.Client.submit_many` (a plain dict with these keys works too)."""

    text: str
    source_lang: str
    target_lang: str
    metadata: dict[str, Any] | None = None
    idempotency_key: str | None = None
    lane: str | None = None  # "interactive" (the default for a job of its own) or "bulk"
    glossary: dict[str, str] | None = None  # source term -> target term the translation must use
    context: str | None = None  # surrounding text the model sees but does not translate
    formality: str | None = None  # "formal", "informal" or None (the model's default)
    memory: bool = True  # whether the translation memory may serve and store this job
    model: str | None = None  # a served model's name; None: the deployment's routing rules choose
    # source_lang "auto": languages the text is likely in, most likely first; any makes the detection a best guess
    # that never fails the job (contract.language_detection.choose_language); none keeps it strict
    source_hints: tuple[str, ...] | list[str] | None = None


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
    tenant: str | None = None
    generation: dict[str, Any] | None = None  # a raw-prompt job (contract/generation.py); None: a translation
    lane: Lane | None = None  # None: the default lane (lane_of)
    glossary: dict[str, str] = msgspec.field(default_factory=dict)  # source term -> target term
    context: str | None = None  # text the model sees but does not translate
    formality: Formality | None = None  # None: the model's default register
    memory: bool = True  # the translation memory may serve and store it
    inline_tags: bool = False  # the text carries placeholder tags the translation must keep (documents)
    model: str | None = None  # the served model whose lanes it is queued in (None: the default model's)
    source_hints: tuple[str, ...] = ()  # source_lang "auto" only: a best guess with these hints; () strict


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


MAX_METADATA_DEPTH = 32
"""How deep metadata may nest: the object itself is level 1, a list or object in it level 2, and so on."""

MAX_METADATA_BYTES = 64 * 1024
"""How large metadata may be, as compact UTF-8 JSON."""

_encode_json = msgspec.json.Encoder().encode


def validate_metadata(metadata: object) -> dict[str, Any]:
    """Return ``metadata`` as a dict if PostgreSQL can store it as given; raise otherwise.

    That is a JSON object with string keys, of strings, finite numbers, booleans, null, lists
    and objects, nested at most :data:`MAX_METADATA_DEPTH` levels, at most
    :data:`MAX_METADATA_BYTES` as JSON, with no NUL character or lone surrogate in any key or
    string. The types and depth are checked without recursion, before anything is encoded.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidMetadataError(f"metadata must be a dict, got {type(metadata).__name__}")
    if not metadata:
        return metadata
    flat = True
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise InvalidMetadataError(f"metadata keys must be strings, got {shown(key)}")
        if "\x00" in key:
            raise InvalidMetadataError(_NUL)
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidMetadataError(_NUL)
        elif not (
            value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value))
        ):
            flat = False
    if not flat:  # the common case needs no walk
        _check_nested(metadata)
    try:
        size = len(_encode_json(metadata))
    except UnicodeEncodeError:
        raise InvalidMetadataError(
            "metadata contains a lone surrogate (half of a UTF-16 pair), which cannot be stored"
        ) from None
    except (TypeError, ValueError, OverflowError) as exc:  # an int too long to write, say
        raise InvalidMetadataError(f"metadata must be JSON-serialisable: {exc}") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidMetadataError(
            f"metadata is {size:,} bytes as JSON, over the limit of {MAX_METADATA_BYTES:,}; keep large data elsewhere"
        )
    return metadata


_NUL = "metadata contains a NUL character (\\u0000), which cannot be stored"


def _check_nested(metadata: dict[str, Any]) -> None:
    """Check every value under ``metadata`` for a JSON type and the depth limit, with a stack, not recursion."""
    stack: list[tuple[object, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidMetadataError(_NUL)
        elif isinstance(value, dict | list | tuple):
            if depth > MAX_METADATA_DEPTH:
                raise InvalidMetadataError(f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep")
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InvalidMetadataError(f"metadata keys must be strings, got {shown(key)}")
                    if "\x00" in key:
                        raise InvalidMetadataError(_NUL)
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidMetadataError(f"metadata must be JSON-serialisable: {value!r} is not a JSON number")
        elif not (value is None or isinstance(value, bool | int)):
            raise InvalidMetadataError(
                "metadata must be JSON-serialisable (strings, numbers, booleans, null, lists, dicts), "
                f"got a {type(value).__name__}"
            )


def _encodable(text: str) -> str:
    """``text`` if it is valid Unicode (no lone surrogate), else a typed error.

    Only a Python caller's text needs this: a wire entry's JSON decoder refuses lone surrogates.
    """
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise InvalidJobError(
                "text contains a lone surrogate (half of a UTF-16 pair), which cannot be stored"
            ) from None
    return text


def build_job_spec(
    job_id: str,
    text: object,
    source_lang: str,
    target_lang: str,
    *,
    max_chars: int,
    metadata: object = None,
    created_at: float | None = None,
    tenant: str | None = None,
    lane: object = None,
    glossary: object = None,
    context: object = None,
    formality: object = None,
    memory: object = None,
    model: object = None,
    source_hints: object = None,
) -> JobSpec:
    """Validate one submission and return its :class:`JobSpec`; nothing is written here.

    ``source_hints`` are kept only with ``source_lang`` ``auto`` (another source needs no detection).
    """
    source = normalize_source_language(source_lang)
    hints = validate_source_hints(source_hints)
    target = normalize_language(target_lang)
    return JobSpec(
        job_id=job_id,
        text=_encodable(validate_text(text, max_chars)),
        source_lang=source,
        target_lang=target,
        created_at=datetime.now(UTC).timestamp() if created_at is None else _as_created_at(created_at),
        metadata=validate_metadata(metadata),
        tenant=None if tenant is None else validate_tenant(tenant),
        lane=None if lane is None else validate_lane(lane),
        glossary=validate_glossary(glossary),
        context=None if context is None else _encodable(validate_context(context) or "") or None,
        formality=validate_formality(formality),
        memory=validate_memory(memory),
        model=None if model is None else validate_model_name(model),
        source_hints=hints if source == AUTO_LANGUAGE else (),
    )


def normalize_source_language(code: object) -> str:
    """``auto`` (any case: the worker detects the language) or the canonical form of a language code."""
    if isinstance(code, str) and code.strip().lower() == AUTO_LANGUAGE:
        return AUTO_LANGUAGE
    return normalize_language(code)


TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""What a tenant name is: 1 to 64 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit."""


def validate_tenant(tenant: object) -> str:
    """Return ``tenant`` if it is a valid tenant name (:data:`TENANT_PATTERN`); raise otherwise.

    Tenant names end up in Redis key names and log lines, so they are kept to a safe alphabet.
    """
    if not isinstance(tenant, str) or TENANT_PATTERN.fullmatch(tenant) is None:
        raise InvalidJobError(
            f"tenant must be 1 to 64 letters, digits, '.', '_' or '-' (starting with a letter or digit), "
            f"got {shown(tenant)}"
        )
    return tenant


LAST_TIMESTAMP = 253_402_300_799
"""9999-12-31T23:59:59Z, in unix seconds: the last time PostgreSQL and Python both hold."""


def _as_created_at(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= LAST_TIMESTAMP:
        raise InvalidJobError(f"created_at must be unix seconds (0 to {LAST_TIMESTAMP}), got {shown(value)}")
    return float(value)


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
    tenant: str | None = None
    finish_reason: str | None = None
    """How the engine ended: ``stop`` (finished), ``length`` (hit its budget: the job failed), ``repetition``
    (looped, also on its sampled retry: the job failed as degenerate output), ``abort``."""
    pieces: int | None = None
    """Engine requests the translation took: more than 1 when a long text was cut into pieces."""
    detected_source_lang: str | None = None  # what the worker found for source_lang "auto"
    glossary_misses: list[str] | None = None  # glossary terms in the text whose target term the translation lacks
    from_memory: bool = False  # served from the translation memory, not generated
    inline_tags: str | None = None  # a tagged document segment: tags "kept", "retried" or "fallback"
    quality_flags: dict[str, str] | None = None
    """What the quality checks found, ``{flag: evidence}`` (:mod:`contract.quality`); ``{}`` clean, None unchecked."""
    waiting_for: str | None = None  # a queued job whose model no live worker serves: "waiting for a worker of model X"

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
