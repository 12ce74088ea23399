"""The lines of an OpenAI Batch API input file, and the lines of its output and error files.

An input line is ``{"custom_id", "method": "POST", "url", "body"}``. ``/v1/translations`` lines
(dragoman's extension) are native translation jobs; ``/v1/chat/completions`` and
``/v1/completions`` lines are raw-prompt jobs (``contract/generation.py``): the messages through
the model's chat template, or the prompt as given, with the request's sampling fields. A line's
``body.model`` is its job's model (resolved by the batch: an alias goes to its model, a name
nobody serves is answered ``model_not_found`` in the error file); without one the deployment's
routes choose. Output lines follow OpenAI's shape: ``id``, ``custom_id``, ``response`` with
``status_code`` and ``body`` (its ``model`` the model that answered), and ``error``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import msgspec

from contract.errors import DragomanError, InvalidJobError
from contract.generation import RAW_LANGUAGE, generation_text, validate_generation
from contract.ids import job_id_for
from contract.json_shape import JsonShapeError, check_json_shape
from contract.model_names import validate_model_name
from contract.schemas import Job, JobSpec, JobStatus, build_job_spec, validate_text
from storage import OutputRow

TRANSLATIONS = "/v1/translations"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
ENDPOINTS = (TRANSLATIONS, CHAT, COMPLETIONS)
"""What a batch's ``endpoint`` may be (OpenAI's names, and dragoman's translation extension)."""
SUPPORTED_ENDPOINTS = frozenset(ENDPOINTS)
"""What the worker runs; a line for another endpoint fails validation, saying so."""
_SAMPLING_FIELDS = {"model", "max_tokens", "temperature", "top_p", "stop", "seed", "n", "user", "stream"}
_GENERATION_FIELDS = {
    CHAT: _SAMPLING_FIELDS | {"messages", "max_completion_tokens"},
    COMPLETIONS: _SAMPLING_FIELDS | {"prompt"},
}

MAX_CUSTOM_ID_CHARS = 512
_BODY_FIELDS = {"text", "source_lang", "target_lang", "metadata", "model"}
_LINE_FIELDS = {"custom_id", "method", "url", "body"}


class BadLineError(DragomanError, ValueError):
    """One input line cannot run; the message says why (the caller adds the line number)."""


def parse_line(raw: bytes, endpoint: str, *, max_chars: int) -> tuple[str, JobSpec]:
    """``(custom_id, job)`` of one input line (the job's ids and group fields are the caller's to set).

    Raises :class:`BadLineError` with the reason the line cannot run.
    """
    item = _decoded(raw)
    if not isinstance(item, dict):
        raise BadLineError("must be a JSON object with custom_id, method, url and body")
    unknown = set(item) - _LINE_FIELDS
    if unknown:
        raise BadLineError(f"unknown field(s) {', '.join(sorted(unknown))}")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip() or len(custom_id) > MAX_CUSTOM_ID_CHARS:
        raise BadLineError(f"custom_id must be a non-empty string of at most {MAX_CUSTOM_ID_CHARS} characters")
    if item.get("method") != "POST":
        raise BadLineError(f'method must be "POST", got {json.dumps(item.get("method"))}')
    url = item.get("url")
    if url != endpoint:
        raise BadLineError(f"url {json.dumps(url)} is not the batch's endpoint {endpoint!r}")
    if url not in SUPPORTED_ENDPOINTS:
        raise BadLineError(f"endpoint {url} not supported yet; dragoman runs {', '.join(ENDPOINTS)} lines")
    body = item.get("body")
    if not isinstance(body, dict):
        raise BadLineError("body must be a JSON object")
    model = _model(body)
    if url != TRANSLATIONS:
        return custom_id, msgspec.structs.replace(_generation_spec(custom_id, url, body, max_chars), model=model)
    unknown = set(body) - _BODY_FIELDS
    if unknown:
        raise BadLineError(f"unknown body field(s) {', '.join(sorted(unknown))}")
    for name in ("source_lang", "target_lang"):
        if not isinstance(body.get(name), str):
            raise BadLineError(f"body.{name} must be a language code string")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise BadLineError("body.metadata must be a JSON object")
    try:
        spec = build_job_spec(
            "",
            body.get("text"),
            body["source_lang"],
            body["target_lang"],
            max_chars=max_chars,
            metadata={**metadata, "custom_id": custom_id},
            model=model,
        )
    except DragomanError as exc:
        raise BadLineError(str(exc)) from None
    return custom_id, spec


def _model(body: dict[str, Any]) -> str | None:
    """The model a line names (``body.model``), or None; :class:`BadLineError` for a value that cannot name one.

    Whether a model of that name is served is the batch's to ask (:class:`~producer.model_routing.ModelResolver`).
    """
    name = body.get("model")
    if name is None:
        return None
    try:
        return validate_model_name(name)
    except InvalidJobError as exc:
        raise BadLineError(f"body.model: {exc}") from None


def _decoded(raw: bytes) -> Any:
    """The line's JSON value; :class:`BadLineError` with the standard library's reason if it has none.

    msgspec decodes a line several times faster; the few documents it refuses that ``json``
    reads (``NaN``, numbers out of range) are read by ``json``, whose message names a real error.
    """
    try:
        check_json_shape(raw, max_values=None)  # before a parser recurses: 100,000 [ is a RecursionError in both
    except JsonShapeError as exc:
        raise BadLineError(str(exc)) from None
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        raise BadLineError(f"not JSON ({reason})") from None


def _generation_spec(custom_id: str, url: str, body: dict[str, Any], max_chars: int) -> JobSpec:
    """A chat or completion line as a raw-prompt job (its ``model`` is :func:`_model`'s to read)."""
    unknown = set(body) - _GENERATION_FIELDS[url]
    if unknown:
        raise BadLineError(f"unsupported body field(s) {', '.join(sorted(unknown))}")
    if body.get("n", 1) != 1:
        raise BadLineError("body.n must be 1 (one choice per request)")
    if body.get("stream"):
        raise BadLineError("body.stream must be false in a batch")
    request: dict[str, Any] = {
        "kind": "chat" if url == CHAT else "completion",
        "max_tokens": body.get("max_completion_tokens", body.get("max_tokens")),
        **{name: body.get(name) for name in ("temperature", "top_p", "stop", "seed")},
    }
    if url == CHAT:
        request["messages"] = body.get("messages")
    else:
        request["prompt"] = body.get("prompt")
    try:
        generation = validate_generation(request)
        text = validate_text(generation_text(generation), max_chars)
    except DragomanError as exc:
        raise BadLineError(f"body: {exc}") from None
    return JobSpec(
        job_id="",
        text=text,
        source_lang=RAW_LANGUAGE,
        target_lang=RAW_LANGUAGE,
        created_at=time.time(),
        metadata={"custom_id": custom_id},
        generation=generation,
    )


def numbered(spec: JobSpec, run_id: str, sequence: int, tenant: str) -> JobSpec:
    """The job of line ``sequence`` of the batch's run: its id is derived, so a resubmission is idempotent."""
    return msgspec.structs.replace(
        spec, job_id=job_id_for(run_id, sequence), run_id=run_id, sequence=sequence, tenant=tenant
    )


def request_id(job_id: str) -> str:
    """An output or error line's ``id`` (``batch_req_`` and the job id's hex digits)."""
    return "batch_req_" + job_id.replace("-", "")


class _Usage(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _TranslationBody(msgspec.Struct):
    id: str
    object: str
    created: int | None
    model: str | None
    source_lang: str
    target_lang: str
    translation: str | None
    usage: _Usage
    metadata: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    quality_flags: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Message(msgspec.Struct):
    role: str
    content: str | None


class _ChatChoice(msgspec.Struct):
    index: int
    message: _Message
    finish_reason: str
    logprobs: None = None


class _TextChoice(msgspec.Struct):
    index: int
    text: str | None
    finish_reason: str
    logprobs: None = None


class _GeneratedBody(msgspec.Struct):
    id: str
    object: str
    created: int | None
    model: str | None
    choices: list[_ChatChoice] | list[_TextChoice]
    usage: _Usage


class _Response(msgspec.Struct):
    status_code: int
    request_id: str
    body: _TranslationBody | _GeneratedBody


class _OutputLine(msgspec.Struct):
    id: str
    custom_id: str | None
    response: _Response
    error: None = None


_encode = msgspec.json.Encoder().encode


def encode_output_line(row: OutputRow, endpoint: str = TRANSLATIONS) -> bytes:
    """A succeeded job's output-file line (JSON, no newline): ``response.body`` as ``endpoint`` answers,
    with its usage. A row without a finish reason (written before one was recorded) finished with ``stop``.
    A ``/v1/translations`` body (dragoman's own shape) carries the job's ``quality_flags`` when it was
    checked; the OpenAI-shaped chat and completion bodies are raw-prompt jobs, never checked, and stay
    exactly OpenAI's.

    Built from :class:`~storage.OutputRow` and encoded from structs: a large batch's output file has a
    line per job, written while its jobs run, and this is the API server's share of that work.
    """
    finish = "length" if row.finish_reason == "length" else "stop"
    prompt, completion = row.prompt_tokens or 0, row.output_tokens or 0
    usage = _Usage(prompt, completion, prompt + completion)
    body: _TranslationBody | _GeneratedBody
    if endpoint == CHAT:
        choice = _ChatChoice(0, _Message("assistant", row.translation), finish)
        body = _GeneratedBody("chatcmpl-" + row.job_id, "chat.completion", row.finished_at, row.model, [choice], usage)
    elif endpoint == COMPLETIONS:
        text = _TextChoice(0, row.translation, finish)
        body = _GeneratedBody("cmpl-" + row.job_id, "text_completion", row.finished_at, row.model, [text], usage)
    else:
        metadata = msgspec.UNSET if row.metadata_json is None else msgspec.Raw(row.metadata_json.encode())
        flags = msgspec.UNSET if row.quality_flags_json is None else msgspec.Raw(row.quality_flags_json.encode())
        body = _TranslationBody(
            row.job_id,
            "translation",
            row.finished_at,
            row.model,
            row.source_lang,
            row.target_lang,
            row.translation,
            usage,
            metadata,
            flags,
        )
    response = _Response(200, row.job_id, body)
    return _encode(_OutputLine(request_id(row.job_id), row.custom_id, response))


MODEL_NOT_FOUND = "model_not_found"
"""The code of a line whose model nobody serves (OpenAI's code for an unknown model)."""
_MODEL_NOT_FOUND_PREFIX = MODEL_NOT_FOUND + ": "


def model_not_found_error(message: str) -> str:
    """The ``error`` of the failed row a line naming an unknown model gets (:func:`error_line` knows it by it)."""
    return _MODEL_NOT_FOUND_PREFIX + message


def error_line(job: Job, expired: bool = False) -> dict[str, Any]:
    """A failed or cancelled job as an error-file line: ``error`` has a code and the reason.

    The cancelled jobs of an ``expired`` batch are ``batch_expired`` (they had not run in its window).
    A line whose model nobody serves is ``model_not_found``, with the ``response`` OpenAI gives such a
    request (``404`` and its error body) besides.
    """
    if job.status is JobStatus.FAILED and job.error and job.error.startswith(_MODEL_NOT_FOUND_PREFIX):
        message = job.error.removeprefix(_MODEL_NOT_FOUND_PREFIX)
        error = {"message": message, "type": "invalid_request_error", "param": "model", "code": MODEL_NOT_FOUND}
        return {
            "id": request_id(job.id),
            "custom_id": job.metadata.get("custom_id"),
            "response": {"status_code": 404, "request_id": job.id, "body": {"error": error}},
            "error": {"code": MODEL_NOT_FOUND, "message": message},
        }
    if job.status is not JobStatus.CANCELLED:
        code, message = "request_failed", job.error or "the job failed"
    elif expired:
        code, message = "batch_expired", "the batch's completion window ended before this request ran"
    else:
        code, message = "request_cancelled", job.error or "cancelled before it ran"
    return {
        "id": request_id(job.id),
        "custom_id": job.metadata.get("custom_id"),
        "response": None,
        "error": {"code": code, "message": message},
    }
