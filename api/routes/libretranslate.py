"""LibreTranslate's API on dragoman: ``/translate``, ``/languages``, ``/detect``, ``/translate_file``, downloads.

Point a LibreTranslate client (Weblate's LibreTranslate backend, ``libretranslatepy``, the
LibreTranslate web UI's calls) at ``dragoman api`` with a dragoman API key as its ``api_key``.
Texts go through the same admission, lanes and workers as ``POST /v1/jobs``
(:func:`api.text_translation.translate_texts`); files are dragoman documents. Errors are
LibreTranslate's ``{"error": "..."}`` (:mod:`api.errors`).

``GET /languages`` and ``GET /frontend/settings`` need no key, as in LibreTranslate (Weblate asks for
the languages without one); they say nothing about any tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from functools import lru_cache
from pathlib import PurePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.datastructures import UploadFile

from api.client_disconnect import cancelled_on_disconnect
from api.door_bodies import LibreDetectBody, LibreFileBody, LibreTranslateBody, request_body
from api.door_markup import markup_metadata
from api.errors import ApiError, dragoman_error_status
from api.libretranslate_fields import libretranslate_request, text_field
from api.libretranslate_html import tag_html
from api.routes.documents import translated_document_response
from api.services import ApiServices, services
from api.source_hints import source_hints
from api.text_translation import check_texts, translate_texts
from broker.download_links import DownloadLinks
from broker.queued_limit import TooManyQueuedJobsError
from contract.documents import FORMATS, SUFFIXES, encode_document
from contract.errors import InvalidJobError, RunNotFinishedError
from contract.ids import canonical_uuid
from contract.language_detection import LanguageDetector
from contract.languages import language_name, normalize_language
from contract.schemas import Job, JobStatus, TranslationRequest, normalize_source_language
from contract.settings import Settings
from markup.placeholders import TaggedText
from producer.groups import DocumentResult
from tenancy.tenant_groups import DocumentNotAssembledError

router = APIRouter(tags=["libretranslate"])
ServicesDep = Annotated[ApiServices, Depends(services)]

_DETECTOR = LanguageDetector()  # py3langid's model, loaded once per process on the first /detect or auto text
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_FIRST_POLL_S = 0.1
_LONGEST_POLL_S = 1.0


@lru_cache(maxsize=4)
def _languages(codes: tuple[str, ...]) -> list[dict[str, Any]]:
    """LibreTranslate's language list of ``codes``: each with its English name, a target of every other."""
    return [
        {"code": code, "name": language_name(normalize_language(code)), "targets": [o for o in codes if o != code]}
        for code in codes
    ]


def _as_listed(code: str | None) -> str | None:
    """A detected language as ``/languages`` names it: the detector's Norwegian, ``no``, is LibreTranslate's
    ``nb`` (Bokmål, what it detects)."""
    return "nb" if code == "no" else code


@router.get("/languages")
async def languages(api: ServicesDep) -> list[dict[str, Any]]:
    """``[{code, name, targets}]``: the languages the deployment translates, ``DRAGOMAN_API_LANGUAGES`` (by default
    LibreTranslate's own list, DeepL's languages and ``nb`` among them), each a target of every other.

    The list is what clients offer (Weblate matches its languages against it: ``nb_NO`` finds ``nb``). It is not
    the detector's languages (among them Latin and Ancient Greek, which no served model is known to translate):
    ``source: auto`` still finds any of those. ``/translate`` takes any other BCP-47 code the model knows too
    (``pt-PT``, ``nn``).
    """
    return _languages(tuple(api.settings.api_languages))


@router.get("/frontend/settings")
async def frontend_settings(api: ServicesDep) -> dict[str, Any]:
    """The settings LibreTranslate's web UI reads: character limit, key required, file formats."""
    return {
        "charLimit": api.settings.max_text_chars,
        "frontendTimeout": 500,  # LibreTranslate's: the web page's pause (ms) after typing before it translates
        "apiKeys": True,
        "keyRequired": True,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": sorted(SUFFIXES),
        "language": {"source": {"code": "auto", "name": "Auto Detect"}, "target": {"code": "en", "name": "English"}},
    }


def _checked_languages(source: str, target: str) -> None:
    """LibreTranslate's ``400 <code> is not supported`` for a source or target dragoman cannot read as a language."""
    for name, code, check in (("source", source, normalize_source_language), ("target", target, normalize_language)):
        try:
            check(code)
        except InvalidJobError as exc:
            raise ApiError(400, "unsupported_language", f"{code} is not supported ({name}): {exc}") from None


def _texts(fields: dict[str, Any]) -> tuple[list[str], bool]:
    """``q`` as a list of texts, and whether it came as a list (the answer then is one too)."""
    q = fields.get("q")
    batch = isinstance(q, list)
    items: list[Any] = q if isinstance(q, list) else [q]
    texts = [text for text in items if isinstance(text, str)]
    if not q or len(texts) != len(items):
        raise ApiError(400, "missing_parameter", "Invalid request: missing q parameter (a string or a list of strings)")
    return texts, batch


def _never_admitted(exc: TooManyQueuedJobsError) -> Exception:
    """The queued-job limit as LibreTranslate's clients know it: ``429`` (with ``Retry-After``) while the
    tenant's jobs drain, ``400`` for a request larger than the key may ever queue (not dragoman's 422)."""
    if exc.retry_after is not None:
        return exc  # the app's handler answers 429 with Retry-After, in LibreTranslate's shape
    return ApiError(400, "over_queued_job_limit", f"Invalid request: {exc}")


def _alternatives(fields: dict[str, Any]) -> int:
    """``alternatives``: how many alternative translations were asked for (dragoman answers none)."""
    try:
        return max(0, int(fields.get("alternatives") or 0))
    except (TypeError, ValueError, OverflowError):  # OverflowError: inf (the door refuses it in JSON first)
        raise ApiError(400, "invalid_parameter", "Invalid request: alternatives parameter is not a number") from None


def _confidence(text: str, language: str | None) -> float:
    """The detector's probability of ``language`` for ``text``, in percent as LibreTranslate gives it (a best guess
    taken from a source hint is often a few percent)."""
    if language is None:
        return 0.0
    return round(_DETECTOR.probability(text, language) * 100, 1)


async def _detected_languages(
    api: ApiServices, count: int, wanted: list[int], sent: list[TranslationRequest], languages: list[str | None]
) -> list[dict[str, Any]]:
    """LibreTranslate's ``detectedLanguage`` of each of ``count`` texts: what the worker detected, with the
    detector's confidence in it; a blank text (no job) is LibreTranslate's ``en`` at 0.

    The confidences take about 0.15 ms a text: the work threads' for a list of a thousand, not the event loop's.
    """
    await _DETECTOR.ready()

    def confidences() -> list[float]:
        return [_confidence(request.text, language) for request, language in zip(sent, languages, strict=True)]

    detected: list[dict[str, Any]] = [{"confidence": 0.0, "language": "en"} for _ in range(count)]
    for index, language, confidence in zip(wanted, languages, await api.work.run(confidences), strict=True):
        detected[index] = {"confidence": confidence, "language": _as_listed(language)}
    return detected


def _checked_texts(settings: Settings, texts: list[str]) -> None:
    """:func:`~api.text_translation.check_texts` in LibreTranslate's terms: every refusal a ``400 Invalid request``."""
    try:
        check_texts(settings, texts)
    except InvalidJobError as exc:
        raise ApiError(400, dragoman_error_status(exc)[1], f"Invalid request: {exc}") from None
    except ApiError as exc:  # more texts than one request may carry: LibreTranslate's over-limit 400
        raise ApiError(400, exc.code, f"Invalid request: {exc.message}") from None


def _tagged_requests(
    texts: list[str], html: bool, source: str, target: str, hints: tuple[str, ...] | None
) -> tuple[list[TaggedText | None], list[int], list[TranslationRequest]]:
    """Each text's markup as placeholders (``html``), the indexes of the texts that are not blank, and their jobs
    (with ``hints``: ``source: auto``'s source hints, :mod:`api.source_hints`).

    Linear in the texts, but a large request's work all the same: run on the API's work threads
    (:class:`~api.cpu_work.CpuWork`), after the limits were checked.
    """
    tagged: list[TaggedText | None] = [tag_html(text) if html else None for text in texts]
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    requests = [
        TranslationRequest(
            text=(tagged[i] or TaggedText(texts[i])).text,
            source_lang=source,
            target_lang=target,
            source_hints=hints,
            metadata=markup_metadata(page.markup) if (page := tagged[i]) is not None else None,
        )
        for i in wanted
    ]
    return tagged, wanted, requests


def _translated(
    texts: list[str], tagged: list[TaggedText | None], wanted: list[int], jobs: list[Job], batch: bool
) -> list[str]:
    """Each text's translation, its markup put back (a blank text as it was); a 500 naming the first that failed.

    Linear in the translations: run on the API's work threads, as the tagging was.
    """
    translated = list(texts)
    for index, job in zip(wanted, jobs, strict=True):
        if job.status != JobStatus.SUCCEEDED or job.translation is None:
            where = f" (q item {index})" if batch else ""
            raise ApiError(500, "translation_failed", f"Cannot translate text{where}: {job.error or job.status}")
        page = tagged[index]
        translated[index] = page.restore(job.translation) if page is not None else job.translation
    return translated


@router.post("/translate", openapi_extra=request_body(LibreTranslateBody))
async def translate(request: Request, api: ServicesDep) -> dict[str, Any]:
    """Translate ``q`` (a string, or a list answered as a list in order) from ``source`` (or ``auto``) into ``target``.

    ``source: auto`` is never refused: a text too short to tell gets a best guess, helped by the request's other
    texts, the key's recent languages and ``DRAGOMAN_DETECTION_DEFAULT_LANGUAGE``; ``detectedLanguage`` says which
    language was used and how sure the detector is of it (in percent, as LibreTranslate gives it).

    ``format: html`` keeps the markup: the model sees placeholder tags, and the tags come back where
    the translation put them. A blank text comes back as it was (no job). ``alternatives`` are
    answered as empty lists: a dragoman job has one translation. More texts than
    ``DRAGOMAN_API_MAX_JOBS_PER_REQUEST``, or one longer than ``DRAGOMAN_MAX_TEXT_CHARS``, is a 400
    before any work on the texts.
    """
    caller, fields = await libretranslate_request(request, api)
    texts, batch = _texts(fields)
    _checked_texts(api.settings, texts)
    source, target = text_field(fields, "source"), text_field(fields, "target")
    text_format = fields.get("format") or "text"
    if text_format not in ("text", "html"):
        raise ApiError(400, "unsupported_format", f"{text_format} format is not supported (use text or html)")
    alternatives = _alternatives(fields)
    _checked_languages(source, target)
    if not request.headers.get("content-type", "").startswith("application/json"):
        texts = [text.replace("\r\n", "\n") for text in texts]  # a form's CRLF line ends, as LibreTranslate does
    html = text_format == "html"
    auto = normalize_source_language(source) == "auto"
    # source: auto is a best guess, never a refusal: LibreTranslate falls back rather than fail (api/source_hints.py)
    asked = [text for text in texts if text.strip()] if auto else []
    hints = await source_hints(api, caller.tenant, asked) if asked else None
    try:
        tagged, wanted, requests = await api.work.run(_tagged_requests, texts, html, source, target, hints)
        jobs: list[Job] = []
        if requests:
            waiting = translate_texts(api, caller, requests, inline_tags=[html] * len(requests))
            jobs = await cancelled_on_disconnect(request, waiting)
    except InvalidJobError as exc:
        raise ApiError(400, dragoman_error_status(exc)[1], str(exc)) from None
    except TooManyQueuedJobsError as exc:
        raise _never_admitted(exc) from None
    translated = await api.work.run(_translated, texts, tagged, wanted, jobs, batch)
    answer: dict[str, Any] = {"translatedText": translated if batch else translated[0]}
    if auto:
        languages = [job.detected_source_lang for job in jobs]
        detected = await _detected_languages(api, len(texts), wanted, requests, languages)
        answer["detectedLanguage"] = detected if batch else detected[0]
    if alternatives:
        answer["alternatives"] = [[] for _ in texts] if batch else []
    return answer


@router.post("/detect", openapi_extra=request_body(LibreDetectBody))
async def detect(request: Request, api: ServicesDep) -> list[dict[str, Any]]:
    """``[{confidence, language}]``: the three likeliest languages of ``q``, confidence in percent (py3langid)."""
    _, fields = await libretranslate_request(request, api)
    texts, _ = _texts(fields)
    text = "\n".join(texts)
    if not text.strip():
        raise ApiError(400, "missing_parameter", "Invalid request: missing q parameter")
    await _DETECTOR.ready()
    ranked = await api.work.run(_DETECTOR.ranked, text, limit=3)
    return [{"confidence": round(p * 100, 1), "language": _as_listed(code)} for code, p in ranked]


@router.post("/suggest")
async def suggest() -> Response:
    """LibreTranslate's suggestions: off here (``/frontend/settings`` says so), answered as LibreTranslate answers
    them off: ``403 {"error": "Suggestions are disabled on this server."}``."""
    raise ApiError(403, "suggestions_disabled", "Suggestions are disabled on this server.")


@router.get("/spec")
async def spec(request: Request) -> dict[str, Any]:
    """The API's OpenAPI document, as LibreTranslate's ``/spec`` answers its own (every door's routes)."""
    document: dict[str, Any] = request.app.openapi()
    return document


def _upload_format(upload: UploadFile) -> tuple[str, str]:
    """The uploaded file's format (from its suffix) and a name safe to put in a URL."""
    name = PurePath(upload.filename or "").name
    fmt = SUFFIXES.get(PurePath(name).suffix.lower())
    if not name or fmt is None:
        raise ApiError(
            400,
            "unsupported_format",
            f"Invalid request: file format not supported ({name or 'no file name'}); dragoman translates "
            f"{', '.join(sorted(SUFFIXES))}",
        )
    return fmt, _SAFE_NAME.sub("_", name)


async def _assembled(api: ServicesDep, tenant: str, document_id: str) -> DocumentResult:
    """The document once assembled, polled for at most ``DRAGOMAN_API_MAX_WAIT_SECONDS``; its failure as an ApiError."""
    limit_s = api.settings.api_max_wait_seconds
    deadline = time.monotonic() + limit_s
    pause = _FIRST_POLL_S
    while True:
        try:
            _, result = await api.groups.document_result(tenant, document_id)
            return result
        except RunNotFinishedError:
            if time.monotonic() >= deadline:
                raise ApiError(
                    504,
                    "translation_timeout",
                    f"the file was not translated within {limit_s:g}s (is a worker running?); it goes on as "
                    f"dragoman document {document_id} (GET /v1/documents/{document_id})",
                ) from None
        except DocumentNotAssembledError as exc:
            progress = await api.groups.progress(tenant, "document", document_id)
            raise ApiError(400, "document_failed", f"Cannot translate file: {progress.error or exc}") from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, _LONGEST_POLL_S)


@router.post("/translate_file", openapi_extra=request_body(LibreFileBody, multipart=True, json=False))
async def translate_file(request: Request, api: ServicesDep) -> dict[str, str]:
    """Translate an uploaded ``file`` (multipart; a format dragoman's documents take) from ``source`` into ``target``.

    Waits for the document (at most ``DRAGOMAN_API_MAX_WAIT_SECONDS``) and answers
    ``{translatedFileUrl}``: ``/download_file/<token>.<file name>``, a link that needs no key and expires
    after ``DRAGOMAN_API_DOWNLOAD_LINK_SECONDS``.
    A segment that failed makes the answer an error (the file would hold untranslated text). A request
    cancelled while it waits (its client disconnected) cancels the document: its id was never answered.
    """
    caller, fields = await libretranslate_request(request, api)
    upload = fields.get("file")
    if not isinstance(upload, UploadFile):
        raise ApiError(400, "missing_parameter", "Invalid request: missing file parameter (a multipart file)")
    source, target = text_field(fields, "source"), text_field(fields, "target")
    _checked_languages(source, target)
    fmt, name = _upload_format(upload)
    data = await upload.read()
    if not data:
        raise ApiError(400, "empty_file", "Invalid request: empty file")
    try:
        document_id = await api.groups.submit_document(
            caller.tenant,
            encode_document(fmt, data),
            fmt,
            source_lang=source,
            target_lang=target,
            name=name,
            callback_url=None,
            max_segment_chars=None,
            max_queued_jobs=caller.max_queued_jobs,
        )
    except InvalidJobError as exc:
        raise ApiError(400, dragoman_error_status(exc)[1], str(exc)) from None
    except TooManyQueuedJobsError as exc:
        raise _never_admitted(exc) from None
    try:
        result = await cancelled_on_disconnect(request, _assembled(api, caller.tenant, document_id))
    except (asyncio.CancelledError, ApiError) as exc:
        # Its client went away (or the request was cancelled) before the translatedFileUrl: nobody could fetch it.
        if not isinstance(exc, ApiError) or exc.status == 499:
            with contextlib.suppress(Exception):
                await asyncio.shield(api.groups.cancel(caller.tenant, "document", document_id))
        raise
    if result.failed_segments:
        first = result.failed_segments[0]
        raise ApiError(
            500,
            "segments_failed",
            f"Cannot translate file: {len(result.failed_segments)} of its segments failed (the first: "
            f"{first.get('error', first)}); dragoman document {document_id} holds them untranslated",
        )
    token = await _links(api).issue(caller.tenant, document_id)
    return {"translatedFileUrl": str(request.url_for("download_file", name=f"{token}.{name}"))}


def _links(api: ApiServices) -> DownloadLinks:
    """The download names of translated files, on the API's Redis client."""
    return DownloadLinks(api.client.redis, api.client.keys, api.settings.api_download_link_seconds)


@router.get("/download_file/{name}", name="download_file", response_class=Response)
async def download_file(name: str, request: Request, api: ServicesDep) -> Response:
    """A file ``/translate_file`` translated: by the unguessable name its ``translatedFileUrl`` holds, with no key,
    for ``DRAGOMAN_API_DOWNLOAD_LINK_SECONDS`` (a link, as LibreTranslate's are); or ``<document id>.<name>``
    with the key of the tenant that sent it (Bearer, or ``api_key``)."""
    prefix, _, filename = name.partition(".")
    if not prefix or not filename:
        raise ApiError(400, "invalid_filename", "Invalid filename: use the translatedFileUrl /translate_file answered")
    document_id = canonical_uuid(prefix)
    if document_id is None:
        named = await _links(api).resolve(prefix)
        if named is None:
            raise ApiError(
                404,
                "file_not_found",
                "File not found: the link is unknown or expired (DRAGOMAN_API_DOWNLOAD_LINK_SECONDS); "
                "translate the file again",
            )
        tenant, document_id = named
    else:
        caller, _ = await libretranslate_request(request, api)
        tenant = caller.tenant
    _, result = await api.groups.document_result(tenant, document_id)
    fmt = result.format if result.format in FORMATS else "txt"
    disposition = {"Content-Disposition": f'attachment; filename="{_SAFE_NAME.sub("_", filename)}"'}
    return translated_document_response(fmt, result.text, disposition)
