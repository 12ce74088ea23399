"""Every error the API answers is ``{"error": {"code": ..., "message": ...}}``, never a stack trace.

On the OpenAI-compatible routes (``/v1/files``, ``/v1/batches``, ``/v1/models``) the object is OpenAI's error
shape, ``{"error": {"message", "type", "param", "code"}}``: the same code and message, plus the
``type`` (``invalid_request_error``, ``authentication_error``, ...) and ``param`` OpenAI's SDKs read.

The codes are stable (clients branch on them); the messages are for people. dragoman's own
typed errors map to codes here, FastAPI's and Starlette's (validation, unknown route, wrong
method) are reshaped, and anything unexpected is logged and answered as ``internal_error``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from broker.queued_limit import TooManyQueuedJobsError
from contract.errors import (
    ConfigurationError,
    DocumentTooLargeError,
    DragomanError,
    EmptyTextError,
    InvalidGlossaryError,
    InvalidJobError,
    InvalidMetadataError,
    JobNotCancellableError,
    JobNotFoundError,
    ModelNotFoundError,
    RunNotFinishedError,
    SubmitNotReplicatedError,
    TextTooLongError,
    UnsupportedLanguageError,
)
from contract.json_shape import JsonTooDeepError, JsonTooManyValuesError
from contract.overload import ServerBusyError
from producer.requests import InvalidJobIdError
from producer.run_files import InvalidRunFileError
from storage import (
    DatabaseUnavailableError,
    FileInUseError,
    FileQuotaExceededError,
    FileTooLargeError,
    GlossaryQuotaExceededError,
    LineTooLongError,
)
from tenancy.batches import (
    BatchFileNotFoundError,
    BatchNotCancellableError,
    BatchNotFoundError,
    InvalidBatchError,
)
from tenancy.tenant_groups import DocumentNotAssembledError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answer: HTTP status, stable code, message and extra headers (``Retry-After``, say)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.param = param


class BodyReadRefusal(StarletteHTTPException):
    """An :class:`ApiError` raised from a request body's read (by a middleware, as the body arrives).

    FastAPI lets only an ``HTTPException`` out of its body read (anything else becomes a bare
    "error parsing the body"); this one carries the error, answered as the error itself.
    """

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.status, error.message, error.headers)
        self.error = error


# Most specific first: the first class an error is an instance of decides.
_DRAGOMAN_CODES: tuple[tuple[type[DragomanError], int, str], ...] = (
    (InvalidJobIdError, 404, "job_not_found"),  # a malformed id cannot name a job: the same answer as an unknown one
    (JsonTooDeepError, 400, "json_too_deep"),
    (JsonTooManyValuesError, 413, "too_many_json_values"),
    (EmptyTextError, 422, "empty_text"),
    (TextTooLongError, 422, "text_too_long"),
    (UnsupportedLanguageError, 422, "unsupported_language"),
    (InvalidMetadataError, 422, "invalid_metadata"),
    (InvalidGlossaryError, 422, "invalid_glossary"),
    (ModelNotFoundError, 404, "model_not_found"),  # OpenAI's code for a model it does not serve
    (InvalidRunFileError, 422, "invalid_run_file"),
    (DocumentTooLargeError, 413, "document_too_large"),
    (InvalidJobError, 422, "invalid_job"),
    (RunNotFinishedError, 409, "not_finished"),
    (DocumentNotAssembledError, 409, "document_not_assembled"),
    (ConfigurationError, 400, "not_configured"),  # from a request: a callback URL without a webhook secret
    (JobNotFoundError, 404, "job_not_found"),
    (JobNotCancellableError, 409, "job_not_cancellable"),
    (SubmitNotReplicatedError, 503, "not_replicated"),  # queued on the primary, not yet on enough replicas
    (ServerBusyError, 503, "server_busy"),  # a pool busy past its wait; also a DatabaseUnavailableError
    (DatabaseUnavailableError, 503, "service_unavailable"),
    (BatchNotFoundError, 404, "batch_not_found"),
    (BatchFileNotFoundError, 404, "file_not_found"),
    (InvalidBatchError, 400, "invalid_batch"),
    (BatchNotCancellableError, 409, "batch_not_cancellable"),
    (FileTooLargeError, 413, "file_too_large"),
    (FileQuotaExceededError, 413, "file_quota_exceeded"),
    (GlossaryQuotaExceededError, 413, "glossary_quota_exceeded"),
    (FileInUseError, 409, "file_in_use"),
    (LineTooLongError, 400, "line_too_long"),
)


def _server_busy_response(request: Request, exc: ServerBusyError) -> JSONResponse:
    """503 ``server_busy`` with ``Retry-After``: a pool stayed busy past its wait (load, not an outage).

    Logged as a warning without a traceback: the operator's remedy is capacity (the pool settings,
    more servers), and the caller's is to retry after the few seconds a burst takes to drain.
    """
    services = getattr(request.app.state, "services", None)
    retry_after = services.settings.api_busy_retry_after_seconds if services is not None else 1
    log.warning("%s %s answered 503 server_busy: %s", request.method, request.url.path, exc)
    headers = {"Retry-After": str(retry_after)}
    return error_response(503, "server_busy", str(exc), headers, request=request)


def _queued_limit_response(request: Request, exc: TooManyQueuedJobsError) -> JSONResponse:
    """429 with ``Retry-After`` while the tenant's jobs drain; 422 for a submission larger than the limit."""
    if exc.retry_after is None:
        return refusal_response(422, "over_queued_job_limit", str(exc), request=request)
    headers = {"Retry-After": str(exc.retry_after)}
    return refusal_response(429, "too_many_queued_jobs", str(exc), headers, request=request)


OPENAI_PREFIXES = ("/v1/files", "/v1/batches", "/v1/models")
"""Routes whose errors take OpenAI's shape."""

DEEPL_PREFIX = ("/v2/", "/v3/")
"""The DeepL-compatible routes (v2, and v3's glossaries): errors are DeepL's ``{"message": ...}`` (its SDK reads
that field)."""

LIBRETRANSLATE_PATHS = frozenset(
    {"/translate", "/languages", "/detect", "/translate_file", "/frontend/settings", "/suggest", "/spec"}
)
"""The LibreTranslate-compatible routes: errors are LibreTranslate's ``{"error": ...}``."""

LIBRETRANSLATE_PREFIXES = ("/download_file/",)
"""LibreTranslate-compatible routes with a path parameter (a translated file's name): the same error shape."""

_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "body_too_large",
    415: "unsupported_media_type",
}


CLIENT_GONE = 499
"""The status (nginx's) of an answer nobody reads: the client closed the connection first."""

_LOGGED_MESSAGE_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _one_line(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, its control characters (newlines too) escaped: one log line."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return _CONTROL.sub(lambda found: ascii(found.group())[1:-1], cut)


def log_refusal(request: Request, status: int, code: str, message: str) -> None:
    """One ``INFO`` line for a refused request: what was asked, the status and code, and the message the client got
    (at most 300 characters, one line whatever the client sent); for a client that went away (499), the message.

    Refused input is not the server's failure: never a traceback.
    """
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else request.url.path
    what = _one_line(f"{request.method} {path}", 200)
    if status == CLIENT_GONE:
        log.info("%s: %s", what, _one_line(message, _LOGGED_MESSAGE_CHARS))  # the message says the client went
    else:
        log.info("%s refused %d %s: %s", what, status, code, _one_line(message, _LOGGED_MESSAGE_CHARS))


def refusal_response(
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    request: Request,
    param: str | None = None,
) -> JSONResponse:
    """:func:`error_response`, with a 4xx logged as one line (:func:`log_refusal`): how every refusal is answered."""
    if 400 <= status < 500:
        log_refusal(request, status, code, message)
    return error_response(status, code, message, headers, request=request, param=param)


def error_response(
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    request: Request | None = None,
    param: str | None = None,
) -> JSONResponse:
    """The JSON error body every failure uses: the door's own shape on OpenAI's, DeepL's and LibreTranslate's routes.

    A message quoting the request's own bad text (a lone surrogate) is escaped: it must be encodable.
    """
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    path = request.url.path if request is not None else ""
    if path.startswith(DEEPL_PREFIX):
        return JSONResponse({"message": message, "code": code}, status_code=status, headers=headers)
    if path in LIBRETRANSLATE_PATHS or path.startswith(LIBRETRANSLATE_PREFIXES):
        return JSONResponse({"error": message, "code": code}, status_code=status, headers=headers)
    error: dict[str, Any] = {"code": code, "message": message}
    if request is not None and path.startswith(OPENAI_PREFIXES):
        kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        error = {"message": message, "type": kind, "param": param, "code": code}
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def dragoman_error_status(exc: DragomanError) -> tuple[int, str]:
    """The HTTP status and code a dragoman error is answered with."""
    for cls, status, code in _DRAGOMAN_CODES:
        if isinstance(exc, cls):
            return status, code
    return 500, "internal_error"


def _validation_message(exc: RequestValidationError) -> tuple[int, str, str]:
    return validation_answer(exc.errors(), exc.body)


def validation_answer(errors: Sequence[Any], body: object) -> tuple[int, str, str]:
    """The status, code and message a body that failed validation with ``errors`` is answered with.

    Also called on the API's work threads, for a large body validated there (:mod:`api.json_body`).
    """
    if any(error.get("type") == "json_invalid" for error in errors):
        detail = next(e for e in errors if e.get("type") == "json_invalid")
        where = detail.get("loc", ("body", "?"))[-1]
        reason = (detail.get("ctx") or {}).get("error", "invalid JSON")
        return 400, "invalid_json", f"the request body is not valid JSON: {reason} at character {where}"
    errors = _matching_branch(errors, body)
    if not errors:
        return 422, "invalid_request", "the body must be a JSON object (one job) or a list of them"
    parts = []
    for error in errors[:10]:
        parts.append(f"{_location(error.get('loc', ()))}: {error.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return 422, "invalid_request", "; ".join(parts) + more


# pydantic names the branch of a union body in an error's location: a model's class name,
# ``function-after[...]`` (a model with a model validator: ``JobRequest``) or ``list[...]``. Field
# names are snake_case, so they never look like one.
_BRANCH = re.compile(r"^(?:[A-Z]\w*|function-after\[.*\]|list\[.*\])$")


def _matching_branch(errors: Sequence[Any], body: object) -> list[Any]:
    """The errors of the union branch the body's JSON type chose (a list: ``list[...]``), its tag dropped.

    A body that is neither an object nor a list matches no branch: an empty list.
    """
    kept = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if len(loc) >= 2 and loc[0] == "body" and isinstance(loc[1], str) and _BRANCH.match(loc[1]):
            is_list_branch = loc[1].startswith("list[")
            if not isinstance(body, dict | list) or is_list_branch != isinstance(body, list):
                continue
            error = {**error, "loc": ("body", *loc[2:])}
        kept.append(error)
    return kept


def _location(loc: Sequence[object]) -> str:
    """``text``, ``item 3: text`` (an item of a list body), ``query.wait``: where an error is."""
    parts = [part for part in loc if part != "body"] if loc[:1] == ("body",) else list(loc)
    if loc[:1] == ("body",) and parts and isinstance(parts[0], int):
        rest = ".".join(str(part) for part in parts[1:])
        return f"item {parts[0]}" + (f": {rest}" if rest else "")
    return ".".join(str(part) for part in parts) or "body"


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in the one JSON shape."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return refusal_response(exc.status, exc.code, exc.message, exc.headers, request=request, param=exc.param)

    @app.exception_handler(DragomanError)
    async def dragoman_error(request: Request, exc: DragomanError) -> JSONResponse:
        if isinstance(exc, TooManyQueuedJobsError):
            return _queued_limit_response(request, exc)
        if isinstance(exc, ServerBusyError):  # before the outage codes: a busy pool's error is one of them too
            return _server_busy_response(request, exc)
        status, code = dragoman_error_status(exc)
        if status >= 500:
            log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
            return error_response(status, code, "a backing service is unavailable; retry shortly", request=request)
        return refusal_response(status, code, str(exc), request=request, param=getattr(exc, "param", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, code, message = _validation_message(exc)
        return refusal_response(status, code, message, request=request)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc, BodyReadRefusal):
            return await api_error(request, exc.error)
        if isinstance(exc.__cause__, ClientDisconnect):  # FastAPI's "error parsing the body" of a body cut short
            return await client_gone(request, exc.__cause__)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.url.path}; see /docs"
        if exc.status_code == 405 and message == "Method Not Allowed":
            message = f"{request.method} is not allowed on {request.url.path}; see /docs"
        return refusal_response(exc.status_code, code, message, exc.headers, request=request)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # Nobody reads this answer; the line says what happened (before: two tracebacks, ~7 KB, per upload).
        return refusal_response(
            CLIENT_GONE,
            "client_closed_request",
            "the client went away before its request body had arrived; nothing was stored",
            request=request,
        )

    @app.exception_handler(RedisConnectionError)
    @app.exception_handler(RedisTimeoutError)
    async def redis_down(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed: Redis unavailable: %s", request.method, request.url.path, exc)
        return error_response(
            503, "service_unavailable", "a backing service is unavailable; retry shortly", request=request
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, "internal_error", "internal error; the server log has the details", request=request)
