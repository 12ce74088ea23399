"""A DeepL API v2 request: its key (however DeepL clients send it) and its fields (JSON, form or query).

DeepL's clients send ``Authorization: DeepL-Auth-Key <key>`` (the SDKs, Weblate); older ones send the
key as an ``auth_key`` form or query field. ``Bearer <key>`` works too. Every form ends in
:func:`api.auth.caller_for_key`, so the key is checked, rate limited and revoked as on the native
door; a key that is missing or not valid is answered 403, as DeepL answers (its SDKs raise
``AuthorizationException`` for it). A key in the header or the query string is checked before the
body is read, so a request without a valid key costs no parsing.

The fields come from a JSON object body (the SDKs' ``/v2/translate`` and glossaries), a form body
(urlencoded or multipart: the SDKs' ``/v2/document`` upload, older clients everywhere, and even
``GET /v2/languages``, whose ``type`` the Python SDK sends as a form body), then the query string.
A repeated form field (``text=a&text=b``) is a list.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import UploadFile

from api.auth import Caller, caller_for_key, client_address
from api.cpu_work import CpuWork
from api.errors import ApiError
from api.input_check import form_fields
from api.json_body import parse_json_body, shape_refusal
from api.services import ApiServices, services
from contract.json_shape import JsonShapeError

_KEY_SCHEMES = ("deepl-auth-key", "bearer")


@dataclass(frozen=True, slots=True)
class DeepLRequest:
    """Who called (the key's tenant) and the request's fields, by name."""

    caller: Caller
    fields: dict[str, Any]
    key_secret: str  # the API key as sent: document keys are derived from it, never shown

    def text(self, name: str, *, required: bool = False) -> str | None:
        """Field ``name`` as one string (``None`` if absent, or a 400 naming it when ``required``)."""
        value = self.fields.get(name)
        if isinstance(value, list):
            value = value[0] if len(value) == 1 else value
        if value is None or value == "":
            if required:
                raise ApiError(400, "missing_parameter", f"Parameter '{name}' not specified.")
            return None
        if isinstance(value, bool):
            return "1" if value else "0"
        if not isinstance(value, str | int | float):
            raise ApiError(400, "invalid_parameter", f"Parameter '{name}' must be a string.")
        return str(value)

    def texts(self, name: str) -> list[str]:
        """Field ``name`` as a list of strings: a JSON list, a repeated form field, or one value."""
        value = self.fields.get(name)
        if value is None:
            return []
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(item, str) for item in items):
            raise ApiError(400, "invalid_parameter", f"Parameter '{name}' must be a string or a list of strings.")
        return list(items)

    def names(self, name: str) -> frozenset[str]:
        """Field ``name`` as a set of tag names: a list, or comma-separated values."""
        return frozenset(part.strip() for item in self.texts(name) for part in item.split(",") if part.strip())

    def file(self, name: str) -> UploadFile:
        """The uploaded file of multipart field ``name``; a 400 naming it when there is none."""
        value = self.fields.get(name)
        if isinstance(value, list):
            value = value[0]
        if not isinstance(value, UploadFile):
            raise ApiError(400, "missing_parameter", f"Parameter '{name}' not specified (a multipart file upload).")
        return value


async def _fields(request: Request, work: CpuWork) -> dict[str, Any]:
    """The request's fields: the body's (JSON object or form), then the query string's for names not in it.

    A JSON body is parsed by :func:`api.json_body.parse_json_body`: nested past the limit, or holding more
    values than a request may, it is refused unparsed (:func:`api.json_body.shape_refusal`); a large one is
    parsed on ``work``'s threads, not the event loop.
    """
    fields: dict[str, Any] = {}
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json":
        body = await request.body()
        if body.strip():
            try:
                parsed = await parse_json_body(body, work)
            except JsonShapeError as exc:
                raise shape_refusal(exc) from None
            except ValueError as exc:
                raise ApiError(400, "invalid_json", f"the request body is not valid JSON: {exc}") from None
            if not isinstance(parsed, dict):
                raise ApiError(400, "invalid_json", "the request body must be a JSON object")
            fields.update(parsed)
    elif media in ("application/x-www-form-urlencoded", "multipart/form-data"):
        fields.update(await form_fields(request))
    for name in request.query_params:
        if name not in fields:
            query_values = request.query_params.getlist(name)
            fields[name] = query_values if len(query_values) > 1 else query_values[0]
    return fields


def _key_from_header(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() not in _KEY_SCHEMES or not token.strip():
        message = "the Authorization header must be `DeepL-Auth-Key <key>` or `Bearer <key>`"
        raise ApiError(403, "invalid_api_key", message)
    return token.strip()


async def deepl_request(request: Request, api: Annotated[ApiServices, Depends(services)]) -> DeepLRequest:
    """The :class:`DeepLRequest`: the key checked (403 missing or not valid, 429 past its rate), the fields read.

    A key sent in the ``Authorization`` header or as ``auth_key`` in the query string is checked before
    the body is read: a request without a valid one is refused without its body being read or parsed.
    Only a legacy client's ``auth_key`` form field needs the body read to be found.
    """
    token = _key_from_header(request) or _query_key(request)
    address = client_address(request)
    if token is not None:
        caller = await _caller(api, token, address)
        fields = await _fields(request, api.work)
        fields.pop("auth_key", None)
        return DeepLRequest(caller, fields, token)
    fields = await _fields(request, api.work)
    sent = fields.pop("auth_key", None)
    if not isinstance(sent, str) or not sent.strip():
        raise ApiError(403, "missing_api_key", "send an API key: `Authorization: DeepL-Auth-Key <key>`")
    return DeepLRequest(await _caller(api, sent, address), fields, sent)


def _query_key(request: Request) -> str | None:
    """The key of ``auth_key`` in the query string (older clients), or ``None``."""
    sent = request.query_params.get("auth_key", "")
    return sent if sent.strip() else None


async def _caller(api: ApiServices, token: str, address: str) -> Caller:
    """The caller ``token`` names, checked and rate limited as on every door; a key DeepL would not know is its 403."""
    try:
        return await caller_for_key(api, token, address)
    except ApiError as exc:
        if exc.status == 401:  # DeepL answers 403 for a key it does not know
            raise ApiError(403, exc.code, exc.message) from None
        raise


DeepLRequestDep = Annotated[DeepLRequest, Depends(deepl_request)]
"""A route parameter of this type requires a valid key and carries the request's fields."""


def document_key(key_secret: str, document_id: str) -> str:
    """The ``document_key`` of a document uploaded with the API key ``key_secret``: an HMAC of its id.

    Keyed by the API key's own secret (through its SHA-256), so nothing is stored, no other key can
    forge it, and it tells nothing about the API key.
    """
    secret = hashlib.sha256(key_secret.encode()).digest()
    return hmac.new(secret, document_id.encode(), hashlib.sha256).hexdigest().upper()


def check_document_key(request: DeepLRequest, document_id: str) -> None:
    """Refuse (400) a ``document_key`` that is missing or not this document's, for this API key."""
    sent = request.text("document_key", required=True) or ""
    # compared as bytes: compare_digest refuses a str with non-ASCII characters (a TypeError, a 500)
    if not hmac.compare_digest(sent.upper().encode(), document_key(request.key_secret, document_id).encode()):
        raise ApiError(
            400,
            "invalid_document_key",
            f"document_key does not match document {document_id} (it is bound to the API key that uploaded it)",
        )
