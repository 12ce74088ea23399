"""One check at the door: text no backing store can hold is refused with 400 before any route sees it.

PostgreSQL's ``text`` and ``jsonb`` cannot hold NUL (U+0000), and a lone surrogate (U+D800 to
U+DFFF without its pair) cannot be encoded as UTF-8 at all: let through, either fails deep in a
route (a database error, an error message that cannot be written) as a 500, with a traceback
and a closed connection. :class:`InputCheck` refuses both, for every route at once, in the path,
the query string, the headers and a JSON body, with ``400 invalid_value`` in the route's
error shape (OpenAI's on the OpenAI routes, ``param`` naming the parameter).

A form body (URL-encoded or multipart) is parsed by its route, not here: the doors that read forms read
them through :func:`form_fields`, which refuses the same characters in any field's name, text or file
name. A JSON number no float holds (``1e400``, ``NaN``) is refused here too (:mod:`api.json_numbers`).

A JSON body can only hold a NUL or a lone surrogate as a ``\\u`` escape (raw, they are invalid
JSON or invalid UTF-8, which the JSON parser refuses with 400 already): a body with no such
escape is passed after a byte search, and only one with one is decoded here to be looked at.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import ApiError, BodyReadRefusal, refusal_response
from api.json_body import SMALL_BODY_BYTES, decode_json
from api.json_numbers import bad_json_number

CODE = "invalid_value"
"""The code of every refusal here: the one the file routes answer for a bad value (issue 33)."""

# A character no store can hold: NUL, or any surrogate (a decoded str holds one only when unpaired).
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
# A \u escape of a surrogate: only a body holding one (or \u0000) can decode to a bad character
# (raw, NUL is invalid JSON and a surrogate invalid UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def bad_character(value: str) -> str | None:
    """How to name the first NUL or lone surrogate in ``value`` (``"U+0000"``, ``"U+D800"``), or None."""
    found = _BAD_CHAR.search(value)
    return None if found is None else f"U+{ord(found.group()):04X}"


def bad_json_escape(body: bytes) -> str | None:
    """The first NUL or lone surrogate a JSON text decodes to (``"U+DC00"``), or None (invalid JSON too).

    Most bodies hold no ``\\u0000`` or surrogate escape, and are passed at the speed of a byte
    search. A body that does (an emoji, as ``json.dumps`` writes it: a pair of escapes, which is
    one valid character) is decoded and looked at again, so that an escaped backslash before the
    letters ``u0000`` or a pair split across two strings is judged right: re-encoded as UTF-8,
    which fails exactly at a lone surrogate, or with a ``\\u0000`` escape, each key and string.
    """
    if b"\\u" not in body:
        return None
    has_nul = b"\\u0000" in body
    if not has_nul and _SURROGATE_ESCAPE.search(body) is None:
        return None
    try:
        value = decode_json(body)
    except ValueError:
        return None  # not JSON, or nested past the limit: the body's parser answers that itself
    if not has_nul:
        # Surrogates only: encoding the whole value as UTF-8 fails exactly where one is alone.
        try:
            msgspec.json.encode(value)
        except UnicodeEncodeError as exc:
            return f"U+{ord(exc.object[exc.start]):04X}"
        return None
    pending: list[object] = [value]  # "\\u0000" may be an escaped backslash and text: look at every string
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            char = bad_character(item)
            if char is not None:
                return char
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return None


def _refusal(where: str, char: str, param: str | None) -> ApiError:
    what = "a NUL character" if char == "U+0000" else f"a lone surrogate ({char})"
    return ApiError(
        400,
        CODE,
        f"{where} holds {what}, which cannot be stored; send valid Unicode text without NUL",
        param=param,
    )


def _number_refusal(number: str, where: str) -> ApiError:
    shown = number if len(number) <= 40 else number[:37] + "..."
    return ApiError(
        400,
        CODE,
        f"{where} is {shown}, which no number can hold (JSON numbers are finite, at most about 1.8e308); "
        "send a finite number",
        param=None if where == "the body" else where,
    )


def check_form_field(name: str, value: object) -> None:
    """Refuse (400 ``invalid_value``, naming it) a form field whose name, text or file name holds a NUL or a lone
    surrogate; a file's bytes are its route's to judge (a document may hold anything)."""
    char = bad_character(name)
    if char is not None:
        raise _refusal(f"the form field name {name!a}", char, ascii(name))
    if isinstance(value, UploadFile):
        char = bad_character(value.filename or "")
        if char is not None:
            raise _refusal(f"the file name of form field {name}", char, name)
    elif isinstance(value, str):
        char = bad_character(value)
        if char is not None:
            raise _refusal(f"the form field {name}", char, name)


async def form_fields(request: Request) -> dict[str, Any]:
    """The request's form (URL-encoded or multipart) by field name, a repeated field as a list, each checked by
    :func:`check_form_field`: what the DeepL and LibreTranslate doors read their form bodies with.

    A form is not JSON, so :class:`InputCheck` cannot look into it as it arrives; a NUL in a form field
    (DeepL's ``glossary_id``) reached PostgreSQL as a 500 before this.
    """
    form = await request.form()
    fields: dict[str, Any] = {}
    for name in form:
        values = form.getlist(name)
        for value in values:
            check_form_field(name, value)
        fields[name] = values[0] if len(values) == 1 else values
    return fields


def _url_refusal(scope: Scope) -> ApiError | None:
    """The refusal of a path, query parameter or header holding a NUL or lone surrogate, or None."""
    char = bad_character(scope.get("path", ""))
    if char is not None:
        param = _path_param(scope)
        return _refusal("the URL path" if param is None else param, char, param)
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        char = bad_character(name) or bad_character(value)
        if char is not None:
            shown = name if bad_character(name) is None else ascii(name)
            return _refusal(f"the query parameter {shown}", char, shown)
    for raw_name, raw_value in scope.get("headers", ()):
        if b"\x00" in raw_value:
            name = raw_name.decode("latin-1")
            return _refusal(f"the header {name}", "U+0000", None)
    return None


def _path_param(scope: Scope) -> str | None:
    """The name of the route's path parameter that holds the bad character (``file_id``), if a route matches."""
    routes = getattr(getattr(scope.get("app"), "router", None), "routes", ())
    for route in routes:
        match, child = route.matches(scope)
        if match is not Match.NONE:
            for name, value in child.get("path_params", {}).items():
                if isinstance(value, str) and bad_character(value) is not None:
                    return str(name)
    return None


def _is_json(scope: Scope) -> bool:
    """Whether the body is parsed as JSON: FastAPI parses a body without a Content-Type as JSON too."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            kind: bytes = bytes(value).split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or kind.endswith(b"+json")
    return True


async def _bad_json_escape_of(scope: Scope, body: bytes) -> str | None:
    """:func:`bad_json_escape` of a whole body: on the API's work threads when it is large and has to be decoded.

    Most bodies are passed after a byte search on the loop; one over :data:`~api.json_body.SMALL_BODY_BYTES`
    with a ``\\u`` escape is decoded on a thread (:class:`~api.cpu_work.CpuWork`), as its parser will be.
    """
    services = getattr(getattr(scope.get("app"), "state", None), "services", None)
    if len(body) <= SMALL_BODY_BYTES or b"\\u" not in body or services is None:
        return bad_json_escape(body)
    try:
        found: str | None = await services.work.run(bad_json_escape, body)
    except ApiError as exc:  # the threads' queue is full: 503, answered from the body's read
        raise BodyReadRefusal(exc) from None
    return found


async def _bad_json_number_of(scope: Scope, body: bytes) -> tuple[str, str] | None:
    """:func:`~api.json_numbers.bad_json_number` of a small body, naming where the number is; a large body's is
    refused by its parse (a search of megabytes holds the interpreter lock, whichever thread runs it)."""
    if len(body) <= SMALL_BODY_BYTES:
        return bad_json_number(body)
    return None  # its one parse refuses it (api.json_body.decode_json), after the shape limits: no search here


class InputCheck:
    """ASGI middleware: NUL and lone surrogates in the path, query, headers or a JSON body are a 400, and so is a
    number no float holds in a JSON body.

    The path, query and headers are checked before the route runs (it never sees them); a JSON
    body is refused from its read, so the route's error handlers answer in its shape and nothing
    was stored: FastAPI reads a JSON body whole before the route's code starts (the size limit,
    outside this check, bounds what is held). A POST to one of ``raw_body_paths`` is an upload
    (a file, a run's JSONL, a document), not a JSON body: its route validates its own content,
    and a document may hold the text ``\\u0000`` as it likes.
    """

    def __init__(self, app: ASGIApp, raw_body_paths: Collection[str] = ()) -> None:
        self.app = app
        self.raw_body_paths = frozenset(raw_body_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a bad URL at once; wrap ``receive`` of a JSON body with the escape check."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = _url_refusal(scope)
        if refused is not None:
            response = refusal_response(
                refused.status, refused.code, refused.message, request=Request(scope), param=refused.param
            )
            await response(scope, receive, send)
            return
        if not _is_json(scope) or (scope.get("method") == "POST" and scope.get("path") in self.raw_body_paths):
            await self.app(scope, receive, send)
            return
        body = bytearray()

        async def checked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    whole = bytes(body)
                    body.clear()
                    char = await _bad_json_escape_of(scope, whole)
                    if char is not None:
                        raise BodyReadRefusal(_refusal("the JSON body", char, None))
                    number = await _bad_json_number_of(scope, whole)
                    if number is not None:
                        raise BodyReadRefusal(_number_refusal(*number))
            return message

        await self.app(scope, checked_receive, send)
