"""JSON request bodies of untrusted depth and size: nesting refused before parsing, a large body's work off the loop.

Every JSON body the API reads comes through here: the native routes' (``POST /v1/jobs``,
``POST /v1/batches``: FastAPI parses and validates them, through :class:`JsonBodyRoute`) and the
DeepL and LibreTranslate doors' (:func:`parse_json_body`, which their field readers call).

- **Shape, before any parser.** A body nesting deeper than
  :data:`~contract.json_shape.MAX_JSON_DEPTH` is ``400 json_too_deep``, one holding more than
  :data:`~contract.json_shape.MAX_JSON_VALUES` values ``413 too_many_json_values``, in the door's
  error shape, found by :func:`~contract.json_shape.check_json_shape` in linear time without
  recursion (before: a ``RecursionError`` deep in the parser, a 500 with 8 KB of traceback, for
  100,000 ``[`` sent without a key).
- **Off the loop.** Parsing a body, and validating it against a route's models, costs time that
  grows with it: pydantic's errors for a list of three million ``{}`` took most of a minute on the
  loop. A body over :data:`SMALL_BODY_BYTES` is checked, parsed and (on a native route) validated
  on the API's work threads (:class:`~api.cpu_work.CpuWork`); a smaller one on the loop, where it
  costs less than the hop. The validated value goes on to FastAPI, which checks it again on the
  loop at an instance check's cost; a body that fails is answered as FastAPI would (``422
  invalid_request`` naming the first errors), its message written on the thread too.
- **Each step bounded.** A thread does not free the loop from a long C call: a parser, pydantic's
  validation and the list of its errors each keep Python's interpreter lock from start to end. So
  each is held small: the parse by the values limit (0.12-0.25 s for the slowest shape within it,
  an object of 249,000 keys, on a shared slow core; most shapes a tenth of that), the validation
  by ``DRAGOMAN_API_MAX_JOBS_PER_REQUEST`` (a list body holding more items, only ``POST /v1/jobs``
  takes one, is ``422 too_many_jobs`` before a single item is validated) and by the job model,
  which answers an object of more fields than a job has, or a glossary of many terms that are not
  strings, with one error, not one each (:class:`api.schemas.JobRequest`).
  And a refused body's objects are freed on the thread, not where its error is answered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import Receive, Scope

from api.cpu_work import CpuWork
from api.errors import ApiError, BodyReadRefusal, validation_answer
from contract.json_shape import JsonShapeError, JsonTooDeepError, check_json_shape

SMALL_BODY_BYTES = 4 * 1024
"""A body up to this size is parsed and validated on the event loop: a few milliseconds at worst
(about a thousand validation errors), less than handing it to a thread and back."""


def decode_json(body: bytes | str) -> Any:
    """``body``'s JSON value, its shape checked first (:class:`~contract.json_shape.JsonShapeError`).

    Raises ``ValueError`` for a body that is not JSON (``json.JSONDecodeError``, or ``UnicodeDecodeError``
    for bytes that are not UTF-8).
    """
    check_json_shape(body)
    return json.loads(body, parse_constant=_non_finite, parse_float=_finite)


class NonFiniteNumberError(ValueError):
    """A JSON number no float holds (``1e400``, ``NaN``, ``Infinity``): refused as the body is parsed.

    Small bodies are refused before, naming where the number is (:mod:`api.json_numbers`); a large one is
    refused here, in its one parse on the work threads, rather than searched beforehand on the loop's thread.
    """


def _non_finite(text: str) -> float:
    raise NonFiniteNumberError(f"{text} is not a number a float holds; send finite numbers")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumberError(f"the number {text[:40]} is beyond what a float holds; send finite numbers")
    return value


async def parse_json_body(body: bytes, work: CpuWork) -> Any:
    """``body``'s JSON value (:func:`decode_json`): on the loop up to :data:`SMALL_BODY_BYTES`, else on ``work``.

    Raises what :func:`decode_json` raises, or ``ApiError(503, "server_busy")`` when the threads' queue is full.
    """
    if len(body) <= SMALL_BODY_BYTES:
        return decode_json(body)
    return await work.run(decode_json, body)


def shape_refusal(exc: JsonShapeError) -> ApiError:
    """The answer of a body past a shape limit: ``400 json_too_deep`` or ``413 too_many_json_values``."""
    if isinstance(exc, JsonTooDeepError):
        return ApiError(400, "json_too_deep", f"the request body is refused: {exc}")
    return ApiError(413, "too_many_json_values", f"the request body is refused: {exc}")


def _decoded_and_validated(body: bytes, field: Any, max_items: int) -> Any:
    """``body`` parsed and validated against a route's body ``field`` (FastAPI's ``ModelField``), on a work thread.

    Raises the answer of a body that fails (``ApiError``: 422 naming its first errors, as FastAPI's own
    validation would be answered) or is too deep; ``json.JSONDecodeError`` is FastAPI's to answer.
    """
    try:
        value = decode_json(body)
    except NonFiniteNumberError as exc:
        raise ApiError(400, "invalid_value", f"the request body is refused: {exc}") from None
    if value is None or field is None:
        return value  # FastAPI's answer for a null body (missing) costs nothing
    if isinstance(value, list) and len(value) > max_items:
        count = len(value)
        del value  # freed here: the error's traceback would keep it alive until the loop answers
        raise ApiError(
            422,
            "too_many_jobs",
            f"{count:,} items in one request, over the limit of {max_items:,} (DRAGOMAN_API_MAX_JOBS_PER_REQUEST)",
        )
    validated, errors = field.validate(value, {}, loc=("body",))
    if errors:
        status, code, message = validation_answer(errors, value)
        del value, errors  # as above
        raise ApiError(status, code, message)
    return validated


class JsonBodyRequest(Request):
    """A request whose :meth:`json` is checked for depth, and parsed and validated off the loop when large.

    FastAPI reads a route's JSON body through ``request.json()`` before it solves the route's
    parameters; a failure raised from it must be an ``HTTPException`` to reach the error handlers
    as itself (:class:`~api.errors.BodyReadRefusal`).
    """

    def __init__(self, scope: Scope, receive: Receive, body_field: Any) -> None:
        super().__init__(scope, receive)
        self._body_field = body_field
        self._parsed: tuple[Any] | None = None

    async def json(self) -> Any:
        """The body's value (validated already when it was large: see the module's docstring)."""
        if self._parsed is None:
            body = await self.body()
            try:
                if len(body) <= SMALL_BODY_BYTES:
                    value = decode_json(body)
                else:
                    services = self.app.state.services
                    limit = services.settings.api_max_jobs_per_request
                    value = await services.work.run(_decoded_and_validated, body, self._body_field, limit)
            except JsonShapeError as exc:
                raise BodyReadRefusal(shape_refusal(exc)) from None
            except ApiError as exc:
                raise BodyReadRefusal(exc) from None
            self._parsed = (value,)
        return self._parsed[0]


class JsonBodyRoute(APIRoute):
    """A FastAPI route whose JSON body is read through :class:`JsonBodyRequest` (every native router's route class).

    The body is validated ahead (on the thread) only where FastAPI validates it as one field, a route with a
    single body parameter; with several (embedded) it is only parsed there, and FastAPI validates it.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler of this route, given a :class:`JsonBodyRequest` instead of a plain request."""
        handler = super().get_route_handler()
        single = self.body_field is not None and not getattr(self, "_embed_body_fields", True)
        body_field = self.body_field if single else None

        async def with_checked_json(request: Request) -> Response:
            return await handler(JsonBodyRequest(request.scope, request.receive, body_field))

        return with_checked_json
