"""Native documents: upload a file (any of ``contract.documents.FORMATS``), follow it, download it, cancel it."""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status

from api.auth import CallerDep
from api.errors import ApiError
from api.json_body import decode_json
from api.schemas import DocumentView, ErrorBody, GroupView
from api.services import ApiServices, services
from contract.controls import MAX_CONTEXT_CHARS
from contract.documents import BINARY_FORMATS, FORMATS, MEDIA_TYPES, SUFFIXES, decode_document, encode_document
from contract.errors import InvalidJobError, RunNotFinishedError
from tenancy.tenant_groups import DocumentNotAssembledError

router = APIRouter(prefix="/v1/documents", tags=["documents"])

ServicesDep = Annotated[ApiServices, Depends(services)]
_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 415, 422, 429, 503)
}
_BY_MEDIA_TYPE = {media: fmt for fmt, media in MEDIA_TYPES.items()}
_FILE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "the document: UTF-8 text, or the bytes of a zipped format (a zip archive)",
        "content": {media: {"schema": {"type": "string"}} for media in MEDIA_TYPES.values()},
    }
}


def _format(request: Request, fmt: str | None, filename: str | None) -> str:
    """The document's format: ``?format=``, else the filename's suffix, else the Content-Type."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ApiError(422, "unsupported_format", f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        return fmt
    if filename:
        by_suffix = SUFFIXES.get(PurePath(filename).suffix.lower())
        if by_suffix:
            return by_suffix
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in _BY_MEDIA_TYPE:
        return _BY_MEDIA_TYPE[media]
    raise ApiError(
        415,
        "unsupported_media_type",
        f"cannot tell the document's format from Content-Type {media or 'none'!r}; send one of "
        f"{', '.join(MEDIA_TYPES.values())}, a filename= with its suffix, or format={'|'.join(FORMATS)}",
    )


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=GroupView,
    responses=_ERRORS,
    openapi_extra=_FILE_BODY,
)
async def submit_document(
    request: Request,
    caller: CallerDep,
    api: ServicesDep,
    target_lang: Annotated[str, Query(description="the language to translate it into")],
    source_lang: Annotated[
        str,
        Query(
            description='the document\'s language, or "auto" (the default): detected from its text when it is split '
            "(detected_source_lang)"
        ),
    ] = "auto",
    format: Annotated[
        str | None, Query(description=f"one of {', '.join(FORMATS)} (else from filename or Content-Type)")
    ] = None,
    filename: Annotated[str | None, Query(max_length=256, description="the file's name (its label)")] = None,
    max_segment_chars: Annotated[int | None, Query(description="longest segment sent as one job")] = None,
    callback_url: Annotated[str | None, Query(description="POSTed (signed) when the document is assembled")] = None,
    retranslate: Annotated[
        bool, Query(description="po/xliff: translate the entries that already have a translation too")
    ] = False,
    model: Annotated[
        str | None, Query(description="the served model its segments go to (GET /v1/models); none: the routes choose")
    ] = None,
    formality: Annotated[
        Literal["formal", "informal", "default"] | None,
        Query(description="register of every segment's translation, where the model's profile supports it"),
    ] = None,
    context: Annotated[
        str | None,
        Query(
            max_length=MAX_CONTEXT_CHARS,
            description="text every segment's model sees but does not translate (what the document is, its audience); "
            "each segment also sees the text before it",
        ),
    ] = None,
    glossary: Annotated[
        str | None,
        Query(
            description="a JSON object of source term -> target term every segment must use, "
            'e.g. {"invoice": "Rechnung"} (at most 200 terms; URL-encoded)'
        ),
    ] = None,
) -> GroupView:
    """Queue a document: ``202`` with it, ``splitting`` until the orchestrator has cut it into jobs.

    The body is the file itself (UTF-8 text, or the bytes of a zipped format: ``.docx``, ``.pptx``, ``.xlsx``,
    ``.odt``, ``.odp``, ``.ods``, ``.epub``, refused ``422`` if not a zip archive; at most
    ``DRAGOMAN_MAX_DOCUMENT_CHARS`` characters, a zipped file counted as its base64).
    Its structure (Markdown, HTML tags, blank lines) comes back unchanged around the translated text.
    ``source_lang=auto`` (the default) detects the document's language from its text once it is split
    (``detected_source_lang`` of ``GET /v1/documents/{id}``); a text too short or too mixed to tell fails
    the document, saying to send ``source_lang``.
    A ``model`` nobody serves is ``404 model_not_found``, nothing stored.
    ``formality``, ``context`` and ``glossary`` are the job controls of ``POST /v1/jobs``, given to every
    segment job (the body is the file itself, so the glossary travels in the query, as JSON).
    """
    fmt = _format(request, format, filename)
    terms = _glossary(glossary)
    raw = await request.body()
    try:
        text = encode_document(fmt, raw)  # a .docx is kept as base64 text (checked to be a zip when submitted)
    except InvalidJobError as exc:
        raise ApiError(422, "invalid_document", str(exc)) from None
    document_id = await api.groups.submit_document(
        caller.tenant,
        text,
        fmt,
        source_lang=source_lang,
        target_lang=target_lang,
        name=filename,
        callback_url=callback_url,
        max_segment_chars=max_segment_chars,
        max_queued_jobs=caller.max_queued_jobs,
        retranslate=retranslate,
        model=model,
        glossary=terms,
        context=context,
        formality=formality,
    )
    return GroupView.of(await api.groups.progress(caller.tenant, "document", document_id))


def _glossary(text: str | None) -> dict[str, str] | None:
    """``glossary=``'s JSON object (checked term by term later, as a job's); ``422 invalid_glossary`` if not one."""
    if text is None or not text.strip():
        return None
    try:
        terms = decode_json(text)  # nested past the limit: refused unparsed, a ValueError too
    except ValueError as exc:
        raise ApiError(
            422, "invalid_glossary", f"glossary must be a JSON object of source -> target terms: {exc}"
        ) from None
    if not isinstance(terms, dict):
        raise ApiError(
            422,
            "invalid_glossary",
            f"glossary must be a JSON object of source -> target terms, got {type(terms).__name__}",
        )
    return terms


@router.get("/{document_id}", response_model=DocumentView, responses=_ERRORS)
async def get_document(document_id: str, caller: CallerDep, api: ServicesDep) -> DocumentView:
    """The document's progress; once assembled, its format and the segments that failed."""
    progress = await api.groups.progress(caller.tenant, "document", document_id)
    view = DocumentView(**GroupView.of(progress).model_dump())
    try:
        fmt, result = await api.groups.document_result(caller.tenant, document_id)
    except (RunNotFinishedError, DocumentNotAssembledError):
        return view
    return view.model_copy(update={"format": fmt, "failed_segments": result.failed_segments, "report": result.report})


@router.get(
    "/{document_id}/content",
    responses={200: {"content": {m: {} for m in MEDIA_TYPES.values()}, "description": "the translation"}, **_ERRORS},
    response_class=Response,
)
async def document_content(document_id: str, caller: CallerDep, api: ServicesDep) -> Response:
    """The translated document, in its format; ``409 not_finished`` until it is assembled,
    ``409 document_not_assembled`` if it failed or was cancelled first.

    Segments that failed are kept in the source language (``GET /v1/documents/{id}`` lists them).
    """
    fmt, result = await api.groups.document_result(caller.tenant, document_id)
    return translated_document_response(fmt, result.text)


def translated_document_response(fmt: str, text: str, headers: dict[str, str] | None = None) -> Response:
    """An assembled document as every door answers it: its bytes (a ``.docx`` decoded) with its format's type.

    Served from the web console's origin: a translated HTML page must never run as that origin's page
    (``sandbox``), nor be sniffed into one.
    """
    headers = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff", **(headers or {})}
    media_type = MEDIA_TYPES.get(fmt, "text/plain")
    if fmt in BINARY_FORMATS:
        return Response(decode_document(fmt, text), media_type=media_type, headers=headers)
    return Response(text, media_type=f"{media_type}; charset=utf-8", headers=headers)


@router.post("/{document_id}/cancel", response_model=GroupView, responses=_ERRORS)
async def cancel_document(document_id: str, caller: CallerDep, api: ServicesDep) -> GroupView:
    """Cancel every job of the document that has not finished; it ends ``cancelled``."""
    return GroupView.of(await api.groups.cancel(caller.tenant, "document", document_id))
