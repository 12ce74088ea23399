"""A LibreTranslate request's fields and its caller: the body is JSON or a form, the key rides in it.

LibreTranslate reads every field (``q``, ``source``, ``target``, ``format``, ``api_key``...) from a
JSON object or from a form (URL-encoded or multipart), with the query string as a fallback (Flask's
``request.values``); its clients use all three (Weblate and ``libretranslatepy`` send forms, even on
``GET /languages``). The key is ``api_key`` in those fields, or dragoman's ``Authorization: Bearer``;
one sent outside the body is checked before the body is read (:func:`libretranslate_request`).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile

from api.auth import Caller, caller_for_key, client_address
from api.cpu_work import CpuWork
from api.errors import ApiError
from api.input_check import form_fields
from api.json_body import NonFiniteNumberError, parse_json_body, shape_refusal
from api.services import ApiServices
from contract.json_shape import JsonShapeError

_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


async def request_fields(request: Request, work: CpuWork) -> dict[str, Any]:
    """The request's fields: the query string, overlaid by a JSON object's or a form's (a repeated form field: a list).

    A JSON body that is not an object is LibreTranslate's ``400 Invalid JSON format``; one nested past the
    limit, or holding more values than a request may, is refused unparsed (:func:`api.json_body.shape_refusal`);
    a large one is parsed on ``work``'s threads (:func:`api.json_body.parse_json_body`), not the event loop.
    """
    fields: dict[str, Any] = dict(request.query_params)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json":
        raw = await request.body()
        try:
            body = await parse_json_body(raw, work) if raw.strip() else {}
        except JsonShapeError as exc:
            raise shape_refusal(exc) from None
        except NonFiniteNumberError as exc:
            raise ApiError(400, "invalid_value", f"Invalid request: {exc}") from None
        except ValueError:
            raise ApiError(400, "invalid_json", "Invalid JSON format: the body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "invalid_json", "Invalid JSON format: the body must be a JSON object")
        fields.update(body)
    elif media in _FORMS:
        fields.update(await form_fields(request))
    return fields


async def libretranslate_request(request: Request, api: ApiServices) -> tuple[Caller, dict[str, Any]]:
    """The caller and the request's fields (:func:`request_fields`); the key is checked before the body is read
    whenever it came outside the body.

    A key sent as ``Authorization: Bearer`` or as ``api_key`` in the query string is checked first, and a
    request without a valid one is refused without its body being read or parsed; only a key that rides
    in the body (LibreTranslate's own way) needs the body read to be found. No key is LibreTranslate's
    ``400`` (its "get an API key" answer), a key dragoman does not know is its ``403 Invalid API key``;
    past the key's rate it is ``429``.
    """
    key = _key_outside_body(request)
    address = client_address(request)
    if key is not None:
        caller = await _caller(api, key, address)
        return caller, await request_fields(request, api.work)
    fields = await request_fields(request, api.work)
    sent = fields.get("api_key")
    if not isinstance(sent, str) or not sent.strip():
        raise ApiError(
            400,
            "missing_api_key",
            "Please contact the server operator to get an API key: send it as api_key (or Authorization: Bearer)",
        )
    return await _caller(api, sent.strip(), address), fields


def _key_outside_body(request: Request) -> str | None:
    """The key of ``api_key`` in the query string, else of ``Authorization: Bearer``; ``None`` if neither has one."""
    sent = request.query_params.get("api_key", "").strip()
    if sent:
        return sent
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def _caller(api: ApiServices, key: str, address: str) -> Caller:
    """The caller ``key`` names, checked and rate limited like every door's; an unknown key is a ``403``."""
    try:
        return await caller_for_key(api, key, address)
    except ApiError as exc:
        if exc.status == 401:
            raise ApiError(403, "invalid_api_key", f"Invalid API key: {exc.message}") from None
        raise


def text_field(fields: dict[str, Any], name: str) -> str:
    """A required text field; LibreTranslate's ``400 Invalid request: missing <name> parameter`` if absent or empty."""
    value = fields.get(name)
    if isinstance(value, UploadFile) or not isinstance(value, str) or not value:
        raise ApiError(400, "missing_parameter", f"Invalid request: missing {name} parameter")
    return value
