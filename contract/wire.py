"""The wire format: how jobs, state records and completion events look in Redis.

This module is the contract between producers (this package, or any app using plain ``XADD``)
and the worker. docs/concepts/wire-format.md describes the same thing for other languages.

Jobs stream entry (``XADD {dragoman}:jobs * v 1 id <uuid> payload <json>``; bulk jobs go to
``{dragoman}:jobs:bulk``, read after interactive ones with a weighted share):
    ``v``        schema version, currently ``"1"``
    ``id``       the job id, a UUID
    ``payload``  JSON object: ``text``, ``source_lang``, ``target_lang`` (required);
                 ``metadata`` (object), ``created_at`` (unix seconds), ``run_id``,
                 ``document_id``, ``sequence``, ``tenant``, ``lane`` (``interactive`` or
                 ``bulk``: the lane it was queued in; ``priority``, its old name, is still
                 read), ``glossary`` (object of source
                 term -> target term), ``context`` (string), ``formality`` (``formal`` or
                 ``informal``), ``memory`` (``false``: not served from or stored in the
                 translation memory), ``inline_tags`` (``true``: the text holds placeholder tags
                 ``<x1>…</x1>``/``<x2/>`` that the translation must keep; document
                 segments); ``model`` (the served model whose lanes the producer chose;
                 informative: the stream decides who runs it); ``source_lang`` may be
                 ``auto``; ``generation`` (optional; a raw-prompt chat or completion
                 request, ``contract/generation.py``: then the languages are recorded as
                 ``und`` whatever was sent); ``source_hints`` (with ``source_lang``
                 ``auto``: a list of language codes the text is likely in, most likely
                 first; the worker then takes a best guess and never fails the job for a
                 text too short to tell, ``contract/language_detection.py``)

Events stream entry and Pub/Sub message: ``v``, ``id``, ``status`` and ``payload`` (JSON with
``job_id``, ``status``, ``error``, ``finished_at``, ``prompt_tokens``, ``output_tokens``); the
Pub/Sub message is the payload JSON alone.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from contract.controls import validate_context, validate_formality, validate_glossary, validate_memory
from contract.errors import InvalidJobError, MalformedEntryError, shown
from contract.generation import RAW_LANGUAGE, validate_generation
from contract.ids import canonical_uuid
from contract.language_detection import validate_source_hints
from contract.languages import normalize_language
from contract.model_names import validate_model_name
from contract.schemas import (
    LAST_TIMESTAMP,
    JobSpec,
    JobStatus,
    Lane,
    normalize_source_language,
    validate_metadata,
    validate_tenant,
    validate_text,
)

SCHEMA_VERSION = "1"
SUPPORTED_VERSIONS = frozenset({SCHEMA_VERSION})

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_json_string = json.JSONEncoder(ensure_ascii=False).encode  # a str as a JSON string literal, in C


def encode_job_entry(spec: JobSpec) -> dict[str, str]:
    """The fields of the jobs-stream entry for ``spec``."""
    payload: dict[str, Any] = {
        "text": spec.text,
        "source_lang": spec.source_lang,
        "target_lang": spec.target_lang,
        "created_at": spec.created_at,
    }
    if spec.metadata:
        payload["metadata"] = spec.metadata
    if spec.run_id is not None:
        payload["run_id"] = spec.run_id
    if spec.document_id is not None:
        payload["document_id"] = spec.document_id
    if spec.sequence is not None:
        payload["sequence"] = spec.sequence
    if spec.tenant is not None:
        payload["tenant"] = spec.tenant
    if spec.generation is not None:
        payload["generation"] = spec.generation
    if spec.lane is not None:
        payload["lane"] = spec.lane.value
    if spec.glossary:
        payload["glossary"] = spec.glossary
    if spec.context is not None:
        payload["context"] = spec.context
    if spec.formality is not None:
        payload["formality"] = spec.formality.value
    if not spec.memory:
        payload["memory"] = False
    if spec.inline_tags:
        payload["inline_tags"] = True
    if spec.model is not None:
        payload["model"] = spec.model
    if spec.source_hints:
        payload["source_hints"] = list(spec.source_hints)
    return {"v": SCHEMA_VERSION, "id": spec.job_id, "payload": _dumps(payload)}


def read_job_id(fields: Mapping[str, str]) -> str | None:
    """The entry's job id if it is a valid UUID, else ``None`` (so a bad entry can still be failed by id)."""
    return canonical_uuid(fields.get("id"))


def decode_job_entry(fields: Mapping[str, str], *, max_chars: int) -> JobSpec:
    """Parse and validate a jobs-stream entry written by any producer.

    Raises :class:`MalformedEntryError` with the reason for anything that does not follow the
    wire format, including invalid language codes, texts over ``max_chars``, values of the wrong
    JSON type, and metadata PostgreSQL could not store (see :func:`validate_metadata`).
    """
    version = fields.get("v")
    if version not in SUPPORTED_VERSIONS:
        raise MalformedEntryError(f"unsupported schema version {version!r}; this worker reads v={SCHEMA_VERSION}")
    job_id = read_job_id(fields)
    if job_id is None:
        raise MalformedEntryError(f"field 'id' must be a UUID, got {shown(fields.get('id'))}")
    raw_payload = fields.get("payload")
    if raw_payload is None:
        raise MalformedEntryError("field 'payload' is missing")
    try:
        payload = msgspec.json.decode(raw_payload)
    except UnicodeError:  # bytes that are not UTF-8, kept by the worker's reader as lone surrogates
        raise MalformedEntryError("field 'payload' is not valid UTF-8") from None
    except ValueError as exc:
        raise MalformedEntryError(f"field 'payload' is not JSON: {exc}") from None
    except RecursionError:
        raise MalformedEntryError("field 'payload' is nested too deeply to read") from None
    if not isinstance(payload, dict):
        raise MalformedEntryError("field 'payload' must be a JSON object")
    for name in ("text", "source_lang", "target_lang"):
        if name not in payload:
            raise MalformedEntryError(f"payload is missing {name!r}")
    try:
        generation = None if payload.get("generation") is None else validate_generation(payload["generation"])
        raw = generation is not None  # a raw-prompt job has no languages: RAW_LANGUAGE
        return JobSpec(
            job_id=job_id,
            text=validate_text(payload["text"], max_chars),
            source_lang=RAW_LANGUAGE if raw else normalize_source_language(payload["source_lang"]),
            target_lang=RAW_LANGUAGE if raw else normalize_language(payload["target_lang"]),
            created_at=_as_timestamp(payload.get("created_at")),
            metadata=validate_metadata(payload.get("metadata")),
            # "batch_id" is the name producers used before runs had one word everywhere.
            run_id=_optional_str(payload, "run_id") or _optional_str(payload, "batch_id"),
            document_id=_optional_str(payload, "document_id"),
            sequence=_optional_int(payload, "sequence"),
            tenant=None if payload.get("tenant") is None else validate_tenant(payload["tenant"]),
            generation=generation,
            lane=_known_lane(_lane_field(payload)),
            glossary=validate_glossary(payload.get("glossary")),
            context=validate_context(payload.get("context")),
            formality=validate_formality(payload.get("formality")),
            memory=validate_memory(payload.get("memory")),
            inline_tags=_optional_flag(payload, "inline_tags"),
            model=None if payload.get("model") is None else validate_model_name(payload["model"]),
            source_hints=validate_source_hints(payload.get("source_hints")),
        )
    except InvalidJobError as exc:
        raise MalformedEntryError(str(exc)) from None


_MAX_SEQUENCE = 2**31 - 1  # the column is a PostgreSQL integer


def _optional_flag(payload: Mapping[str, Any], name: str) -> bool:
    """A boolean payload field that defaults to false."""
    value = payload.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidJobError(f"{name} must be true or false, got {shown(value)}")
    return value


def _lane_field(payload: Mapping[str, Any]) -> object:
    """The payload's ``lane``, or ``priority``: the one place the old name is read.

    ``priority`` is what producers wrote before the lane had one word everywhere (entries queued
    before an upgrade, other languages' producers); it is deprecated. Both, naming different
    lanes, is refused: the producer meant one of them. A value that names no lane is a word of
    the producer's own, which refuses nothing (:func:`_known_lane`): beside the other, it is no conflict.
    """
    lane, priority = payload.get("lane"), payload.get("priority")
    if _known_lane(lane) is not None and _known_lane(priority) is not None and lane != priority:
        raise InvalidJobError(
            f"payload has lane {shown(lane)} and priority {shown(priority)}; send lane alone "
            "(priority is its deprecated old name)"
        )
    return priority if lane is None else lane


def _known_lane(value: object) -> Lane | None:
    """The payload's lane if it names one, else ``None``: the stream an entry was read from
    decides its lane, so a value this version does not know (a plain-XADD producer's own word, or a
    newer lane) is no reason to refuse the job."""
    return _LANES.get(value) if isinstance(value, str) else None


_LANES = {lane.value: lane for lane in Lane}


def _as_timestamp(value: object) -> float:
    if value is None:
        return time.time()
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= LAST_TIMESTAMP:
        raise MalformedEntryError(
            f"payload 'created_at' must be unix seconds (0 to {LAST_TIMESTAMP}), got {shown(value)}"
        )
    return float(value)


def _optional_str(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is None:
        return None
    canonical = canonical_uuid(value)
    if canonical is None:
        raise MalformedEntryError(f"payload {name!r} must be a UUID, got {shown(value)}")
    return canonical


def _optional_int(payload: Mapping[str, Any], name: str) -> int | None:
    value = payload.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SEQUENCE:
        raise MalformedEntryError(f"payload {name!r} must be an integer from 0 to {_MAX_SEQUENCE}, got {shown(value)}")
    return value


class JobEvent(msgspec.Struct, frozen=True):
    """A completion event: published once a job's final row is committed."""

    job_id: str
    status: JobStatus
    finished_at: float
    error: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None

    def to_json(self) -> str:
        """The payload JSON (also the whole Pub/Sub message).

        Written out field by field (the worker makes one per job, and the generic encoder was a
        measurable share of its time); the strings go through the C encoder.
        """
        finished_at = float(self.finished_at)
        if not math.isfinite(finished_at):
            raise ValueError(f"finished_at must be a finite number, got {finished_at!r}")
        error = "null" if self.error is None else _json_string(self.error)
        prompt = "null" if self.prompt_tokens is None else int(self.prompt_tokens)
        output = "null" if self.output_tokens is None else int(self.output_tokens)
        return (
            f'{{"job_id":{_json_string(self.job_id)},"status":"{self.status.value}",'
            f'"finished_at":{finished_at!r},"error":{error},"prompt_tokens":{prompt},'
            f'"output_tokens":{output}}}'
        )

    def to_fields(self) -> dict[str, str]:
        """The fields of the events-stream entry."""
        return {"v": SCHEMA_VERSION, "id": self.job_id, "status": self.status.value, "payload": self.to_json()}

    @classmethod
    def from_json(cls, raw: str | bytes) -> JobEvent:
        """Parse a Pub/Sub message or an events-stream entry's payload."""
        try:
            data = json.loads(raw)
            return cls(
                job_id=str(data["job_id"]),
                status=JobStatus(data["status"]),
                finished_at=float(data["finished_at"]),
                error=data.get("error"),
                prompt_tokens=data.get("prompt_tokens"),
                output_tokens=data.get("output_tokens"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedEntryError(f"not a dragoman event: {exc}") from None
