"""The DeepL API v2-compatible door: translate, documents, glossaries, languages and usage.

Point a DeepL client (the ``deepl`` SDKs, Weblate's DeepL backend) at this server with a dragoman
API key as its auth key. Texts go through :func:`api.text_translation.translate_texts`, the same
admission and submitter as ``POST /v1/jobs``, on the interactive lane; documents through the
tenant's documents (:class:`tenancy.tenant_groups.TenantGroups`), as ``/v1/documents``. What maps
and what does not: docs/guides/deepl-api.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections import Counter
from pathlib import PurePath
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status

from api.client_disconnect import cancelled_on_disconnect
from api.deepl_glossary_entries import document_terms, glossary_name, parse_entries, to_tsv
from api.deepl_languages import (
    SOURCE_LANGUAGES,
    TARGET_LANGUAGES,
    base_language,
    model_type_used,
    to_bcp47,
    to_deepl,
    to_formality,
)
from api.deepl_request import DeepLRequest, DeepLRequestDep, check_document_key, document_key
from api.deepl_schemas import (
    DeepLErrorBody,
    DocumentHandleBody,
    DocumentStatusBody,
    GlossaryBody,
    GlossaryLanguagePair,
    GlossaryLanguagePairs,
    GlossaryList,
    LanguageBody,
    TextTranslation,
    TranslateResponse,
    UsageBody,
)
from api.deepl_tags import TAG_HANDLINGS, TaggedText, restore, to_placeholders
from api.door_bodies import (
    DeepLDocumentBody,
    DeepLDocumentKeyBody,
    DeepLGlossaryBody,
    DeepLLanguagesBody,
    DeepLTranslateBody,
    query_field,
    request_body,
)
from api.door_markup import markup_metadata
from api.errors import ApiError
from api.glossary_terms import TermFinder
from api.routes.documents import translated_document_response
from api.services import ApiServices, services
from api.source_hints import source_hints
from api.text_translation import check_request_bytes, translate_texts
from broker.queued_limit import TooManyQueuedJobsError
from contract.controls import AUTO_LANGUAGE, Control, Formality
from contract.documents import BINARY_FORMATS, MEDIA_TYPES, SUFFIXES, encode_document
from contract.errors import InvalidJobError, RunNotFinishedError
from contract.schemas import Job, JobStatus, Lane, TranslationRequest
from storage import Dictionary, DictionaryInfo, GlossaryInfo, GlossaryStore
from storage.usage import UsageStore
from tenancy.tenant_groups import DocumentNotAssembledError

router = APIRouter(prefix="/v2", tags=["deepl"])
ServicesDep = Annotated[ApiServices, Depends(services)]

_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": DeepLErrorBody} for code in (400, 403, 404, 413, 429, 500, 503, 504)
}
_DOCUMENT_STATUS = {
    "splitting": "queued",
    "held": "queued",
    "submitting": "queued",
    "running": "translating",
    "finishing": "translating",
    "completed": "done",
    "failed": "error",
    "cancelled": "error",
}


def _glossaries(request: Request) -> GlossaryStore:
    store: GlossaryStore = request.app.state.glossaries
    return store


def _bad_request(exc: InvalidJobError) -> ApiError:
    """DeepL answers a request it cannot take with 400 (its SDKs: ``DeepLException``, "Bad request")."""
    return ApiError(400, "bad_request", str(exc))


async def _glossary_for(
    request: Request, deepl: DeepLRequest, source_lang: str, target_lang: str
) -> list[tuple[str, str]] | None:
    """The entries of the glossary ``glossary_id`` names for the request's pair (its dictionary for the pair's base
    languages: a v2 glossary's one, or one of a v3 glossary's); ``None`` without one."""
    glossary_id = deepl.text("glossary_id")
    if glossary_id is None:
        return None
    if source_lang == AUTO_LANGUAGE:
        raise ApiError(400, "missing_parameter", "Parameter 'source_lang' is required when using a glossary.")
    store = _glossaries(request)
    info = await store.info(deepl.caller.tenant, glossary_id)
    if info is None:
        raise ApiError(404, "glossary_not_found", f"glossary {glossary_id} not found")
    pair = (base_language(source_lang), base_language(target_lang))
    asked = f"{to_deepl(source_lang)} -> {to_deepl(target_lang)}"
    entries = await store.entries(deepl.caller.tenant, glossary_id, *pair) if info.dictionary(*pair) else None
    if entries is None:
        held = ", ".join(f"{d.source_lang.upper()} -> {d.target_lang.upper()}" for d in info.dictionaries)
        if info.monolingual is not None:
            message = f"glossary {glossary_id} is for {held}, not {asked}"
        else:
            message = f"glossary {glossary_id} has no dictionary for {asked} (it has {held})"
        raise ApiError(400, "glossary_language_mismatch", message)
    return entries


async def _formality_for(api: ApiServices, deepl: DeepLRequest, source_lang: str, target_lang: str) -> Formality | None:
    """DeepL's ``formality`` as the job's control, where the model the jobs go to can apply it.

    ``prefer_more``/``prefer_less`` are dropped for a model whose workers report no formality control (DeepL
    falls back the same way); ``more``/``less`` are refused at once (400, as DeepL refuses them for a
    language without formality) rather than queued to fail. Unknown (no live worker yet): kept as asked.
    """
    value = deepl.text("formality")
    try:
        formality = to_formality(value)
    except InvalidJobError as exc:
        raise _bad_request(exc) from None
    if formality is None:
        return None
    controls = await api.client.models.controls_for(source_lang, target_lang, Lane.INTERACTIVE)
    if controls is None or Control.FORMALITY.value in controls:
        return formality
    if str(value).lower().startswith("prefer_"):
        return None
    raise ApiError(
        400,
        "formality_not_supported",
        f"formality {value!r} is not supported by the model serving {to_deepl(target_lang)} here (it applies "
        f"{', '.join(sorted(controls)) or 'no controls'}); use prefer_more/prefer_less, or leave formality out",
    )


def _translations(
    texts: list[str],
    wanted: list[int],
    jobs: list[Job],
    tagged: list[TaggedText],
    blank_language: str,
    model_type: str | None,
) -> list[TextTranslation]:
    """The answer's translations, in the order of ``texts``: each job's, its markup put back; a blank text (no job)
    as it was sent, in ``blank_language``; a 400 naming the first text not translated.

    400, not 5xx: the worker has retried already, and DeepL's SDKs resubmit every 5xx answer. Linear in the
    translations: run on the API's work threads, as the tagging was.
    """
    translations = [
        TextTranslation(
            detected_source_language=to_deepl(blank_language),
            text=text,
            billed_characters=len(text),
            model_type_used=model_type,
        )
        for text in texts
    ]
    for index, job, item in zip(wanted, jobs, tagged, strict=True):
        if job.status is not JobStatus.SUCCEEDED or job.translation is None:
            raise ApiError(400, "translation_failed", f"text {index} was not translated: {job.error or job.status}")
        detected = job.detected_source_lang or job.source_lang or AUTO_LANGUAGE
        translations[index] = TextTranslation(
            detected_source_language=to_deepl(detected),
            text=restore(job.translation, item.markup),
            billed_characters=len(texts[index]),
            model_type_used=model_type,
        )
    return translations


_ITEM = re.compile(r"^item (\d+): ")


def _numbered_as_sent(exc: InvalidJobError, wanted: list[int]) -> InvalidJobError:
    """``exc`` naming the text by its place in the request (``item 3``), not among the texts that had a job."""
    found = _ITEM.match(str(exc))
    if found is None or int(found.group(1)) >= len(wanted):
        return exc
    return type(exc)(f"item {wanted[int(found.group(1))]}: {str(exc)[found.end() :]}")


def _blank_language(source_lang: str, jobs: list[Job], hints: tuple[str, ...] | None, default: str) -> str:
    """The ``detected_source_language`` of a blank text (it has no job): the request's source language, else the
    language most of its other texts were found in, else its first source hint, else the default language."""
    if source_lang != AUTO_LANGUAGE:
        return source_lang
    found = Counter(job.detected_source_lang for job in jobs if job.detected_source_lang)
    if found:
        return found.most_common(1)[0][0]
    return hints[0] if hints else default


def _tagged_requests(
    texts: list[str],
    tag_handling: str | None,
    ignore_tags: frozenset[str],
    entries: list[tuple[str, str]] | None,
    base: TranslationRequest,
    max_chars: int,
) -> tuple[list[TaggedText], list[TranslationRequest]]:
    """Each text's markup swapped for placeholders (``tag_handling``), and its job: ``base`` with the text and the
    glossary terms found in it. A text whose placeholders make it longer than ``max_chars`` (thousands of short
    tags) is DeepL's 413: no job may carry it.

    Linear in the texts and the glossary, but a large request's work all the same: run on the API's work
    threads (:class:`~api.cpu_work.CpuWork`), after the limits were checked.
    """
    tagged = [to_placeholders(text, tag_handling, ignore_tags) if tag_handling else TaggedText(text) for text in texts]
    for item in tagged:
        if len(item.text) > max_chars:
            raise ApiError(
                413,
                "request_too_large",
                f"Request Entity Too Large: with its markup as placeholder tags, a text is {len(item.text):,} "
                f"characters, over the {max_chars:,} a job may carry; send it in parts",
            )
    finder = TermFinder(entries) if entries else None
    requests = [
        dataclasses.replace(
            base,
            text=item.text,
            glossary=(finder.terms_in(text) or None) if finder else None,
            metadata=markup_metadata(item.markup),  # the job's views show the client's markup (api/door_markup.py)
        )
        for item, text in zip(tagged, texts, strict=True)
    ]
    return tagged, requests


@router.post(
    "/translate",
    response_model=TranslateResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
    openapi_extra=request_body(DeepLTranslateBody),
)
async def translate(request: Request, deepl: DeepLRequestDep, api: ServicesDep) -> TranslateResponse:
    """Translate one or many ``text`` into ``target_lang`` and answer with the translations, in order.

    ``source_lang`` absent: detected, a best guess for a text too short to tell (helped by the request's other
    texts, the key's recent languages, ``DRAGOMAN_DETECTION_DEFAULT_LANGUAGE``), never a refusal; each
    translation's ``detected_source_language`` says what was used. ``formality``: ``more``/``prefer_more``
    ask for a formal register, ``less``/``prefer_less`` an informal one. ``context`` is passed as the
    job's context; ``glossary_id`` the tenant's stored glossary (its pair must match; the terms found
    in each text travel with its job). ``tag_handling`` ``xml``/``html``: the markup is kept byte for
    byte (``ignore_tags`` elements untranslated). ``preserve_formatting``, ``split_sentences``,
    ``model_type`` and DeepL's other tag options are accepted and have no effect. A text the worker
    could not translate (after its own retries) is a 400 with its reason. An empty (or blank) text is answered as
    it was sent, with no job, as DeepL answers ``""`` for ``""``; a request of only such texts queues nothing.
    More texts than ``DRAGOMAN_API_MAX_JOBS_PER_REQUEST``, or texts of more than
    ``DRAGOMAN_API_DEEPL_MAX_REQUEST_BYTES`` (128 KiB of UTF-8, DeepL's request limit) together, is a 413 before any
    work on the texts; one text may take the whole request (the worker cuts a long text into pieces).
    """
    texts = deepl.texts("text")
    if not texts:
        raise ApiError(400, "missing_parameter", "Parameter 'text' not specified.")
    try:
        check_request_bytes(api.settings, texts)
        target_lang = to_bcp47(deepl.text("target_lang", required=True), "target_lang")
        source = deepl.text("source_lang")
        source_lang = AUTO_LANGUAGE if source is None else to_bcp47(source, "source_lang")
        model_type = model_type_used(deepl.text("model_type"))
    except InvalidJobError as exc:
        raise _bad_request(exc) from None
    formality = await _formality_for(api, deepl, source_lang, target_lang)
    glossary = await _glossary_for(request, deepl, source_lang, target_lang)
    tag_handling = deepl.text("tag_handling")
    if tag_handling is not None and tag_handling not in TAG_HANDLINGS:
        raise ApiError(400, "bad_request", f"Value for 'tag_handling' not supported: {tag_handling!r}; use xml or html")
    # A blank text is answered as it was sent, with no job (DeepL answers "" for ""): only the others are translated.
    wanted = [index for index, text in enumerate(texts) if text.strip()]
    asked = [texts[index] for index in wanted]
    # No source_lang: a best guess, never a refusal (DeepL detects something for every text; api/source_hints.py).
    hints = await source_hints(api, deepl.caller.tenant, asked) if source_lang == AUTO_LANGUAGE and asked else None
    base = TranslationRequest(
        text="",
        source_lang=source_lang,
        target_lang=target_lang,
        context=deepl.text("context"),
        formality=formality.value if formality else None,
        source_hints=hints,
    )
    entries = glossary
    max_chars = api.settings.max_job_text_chars  # one text may be as long as a request (the worker cuts it)
    tagged: list[TaggedText] = []
    jobs: list[Job] = []
    try:
        if asked:
            tagged, requests = await api.work.run(
                _tagged_requests, asked, tag_handling, deepl.names("ignore_tags"), entries, base, max_chars
            )
            flags = [item.tagged for item in tagged]
            waiting = translate_texts(api, deepl.caller, requests, inline_tags=flags, max_chars=max_chars)
            jobs = await cancelled_on_disconnect(request, waiting)
    except InvalidJobError as exc:
        raise _bad_request(_numbered_as_sent(exc, wanted)) from None
    except TooManyQueuedJobsError as exc:
        if exc.retry_after is not None:
            raise  # 429 with Retry-After: DeepL's SDKs wait and retry
        raise ApiError(400, "over_queued_job_limit", str(exc)) from None  # more texts than the key may ever queue
    blank = _blank_language(source_lang, jobs, hints, api.settings.detection_default_language)
    answered = await api.work.run(_translations, texts, wanted, jobs, tagged, blank, model_type)
    return TranslateResponse(translations=answered)


# Documents -----------------------------------------------------------------------------------


@router.post(
    "/document",
    response_model=DocumentHandleBody,
    responses=_ERRORS,
    openapi_extra=request_body(DeepLDocumentBody, multipart=True, json=False),
)
async def upload_document(request: Request, deepl: DeepLRequestDep, api: ServicesDep) -> DocumentHandleBody:
    """Upload a document (multipart ``file``, any format ``/v1/documents`` takes) to translate into ``target_lang``.

    ``source_lang`` absent: detected from the document's text once it is split (the status answers
    ``detected_source_language``). ``formality`` and ``glossary_id`` (the terms
    found in the document) reach every segment job, as on ``/v2/translate``; an ``output_format`` other
    than the input's is refused (400).
    """
    upload = deepl.file("file")
    suffix = PurePath(upload.filename or "").suffix.lower()
    fmt = SUFFIXES.get(suffix)
    if fmt is None:
        known = ", ".join(sorted(SUFFIXES))
        message = f"cannot translate a {suffix or 'suffix-less'} file; send one of {known}"
        raise ApiError(400, "unsupported_format", message)
    output_format = deepl.text("output_format")
    if output_format is not None and SUFFIXES.get("." + output_format.lower().lstrip(".")) != fmt:
        message = f"output_format {output_format!r} is not supported: a document comes back as {suffix}"
        raise ApiError(400, "bad_request", message)
    try:
        target_lang = to_bcp47(deepl.text("target_lang", required=True), "target_lang")
        source = deepl.text("source_lang")
        source_lang = AUTO_LANGUAGE if source is None else to_bcp47(source, "source_lang")
    except InvalidJobError as exc:
        raise _bad_request(exc) from None
    formality = await _formality_for(api, deepl, source_lang, target_lang)
    glossary = await _glossary_for(request, deepl, source_lang, target_lang)
    try:
        text = encode_document(fmt, await upload.read())
        searchable = None if fmt in BINARY_FORMATS else text
        terms = await api.work.run(document_terms, glossary, searchable) if glossary else None
        document_id = await api.groups.submit_document(
            deepl.caller.tenant,
            text,
            fmt,
            source_lang=source_lang,
            target_lang=target_lang,
            name=upload.filename,
            callback_url=None,
            max_segment_chars=None,
            max_queued_jobs=deepl.caller.max_queued_jobs,
            glossary=terms or None,
            context=deepl.text("context"),
            formality=formality.value if formality else None,
        )
    except InvalidJobError as exc:
        raise _bad_request(exc) from None
    return DocumentHandleBody(document_id=document_id, document_key=document_key(deepl.key_secret, document_id))


@router.post(
    "/document/{document_id}",
    response_model=DocumentStatusBody,
    responses=_ERRORS,
    openapi_extra=request_body(DeepLDocumentKeyBody),
)
async def document_status(document_id: str, deepl: DeepLRequestDep, api: ServicesDep) -> DocumentStatusBody:
    """Where the document stands: ``queued``, ``translating`` (with ``seconds_remaining``), ``done`` or ``error``.

    A document uploaded without ``source_lang`` answers the language detected in it
    (``detected_source_language``, DeepL's upper-case code) once it is split. ``done`` answers
    ``billed_characters``: its segments' source characters, as ``/v2/usage`` counts them.

    ``document_key`` must be the one its upload answered (400 otherwise).
    """
    check_document_key(deepl, document_id)
    progress = await api.groups.progress(deepl.caller.tenant, "document", document_id)
    state = _DOCUMENT_STATUS.get(progress.status, "translating")
    left = int(progress.seconds_left) if state == "translating" and progress.seconds_left is not None else None
    error = None
    if state == "error":
        error = progress.error or f"the document was {progress.status}"
    detected = to_deepl(progress.detected_source_lang) if progress.detected_source_lang else None
    billed = await api.groups.document_characters(deepl.caller.tenant, document_id) if state == "done" else None
    return DocumentStatusBody(
        document_id=document_id,
        status=state,
        seconds_remaining=left,
        error_message=error,
        detected_source_language=detected,
        billed_characters=billed,
    )


@router.post(
    "/document/{document_id}/result",
    response_class=Response,
    responses={200: {"content": {m: {} for m in MEDIA_TYPES.values()}, "description": "the translation"}, **_ERRORS},
    openapi_extra=request_body(DeepLDocumentKeyBody),
)
async def document_result(document_id: str, deepl: DeepLRequestDep, api: ServicesDep) -> Response:
    """The translated document, in its format; 503 until it is done (DeepL's "document not ready")."""
    check_document_key(deepl, document_id)
    try:
        fmt, result = await api.groups.document_result(deepl.caller.tenant, document_id)
    except RunNotFinishedError as exc:
        raise ApiError(503, "document_not_ready", str(exc), {"Retry-After": "1"}) from None
    except DocumentNotAssembledError as exc:
        raise ApiError(400, "document_not_assembled", str(exc)) from None
    return translated_document_response(fmt, result.text)


# Glossaries ----------------------------------------------------------------------------------


@router.post(
    "/glossaries",
    status_code=status.HTTP_201_CREATED,
    response_model=GlossaryBody,
    responses=_ERRORS,
    openapi_extra=request_body(DeepLGlossaryBody),
)
async def create_glossary(request: Request, deepl: DeepLRequestDep, api: ServicesDep) -> GlossaryBody:
    """Store a glossary of the tenant: ``name``, ``source_lang``, ``target_lang``, ``entries`` in ``entries_format``
    (``tsv``, the default, or ``csv``). A bad entry is a 400 naming its line, and so is a pair of one language
    (``/v2/glossary-language-pairs`` has none: no translation could use it). A tenant's glossaries are held to
    ``DRAGOMAN_GLOSSARY_QUOTA_COUNT`` glossaries and ``DRAGOMAN_GLOSSARY_QUOTA_BYTES`` bytes of terms: past
    either, ``413 glossary_quota_exceeded`` and nothing stored (exact when creates race for the last place)."""
    try:
        name = glossary_name(deepl.text("name", required=True) or "")
        source_lang = base_language(to_bcp47(deepl.text("source_lang", required=True), "source_lang"))
        target_lang = base_language(to_bcp47(deepl.text("target_lang", required=True), "target_lang"))
        if source_lang == target_lang:
            raise InvalidJobError(
                f"a glossary translates between two languages; source_lang and target_lang are the same language "
                f"({to_deepl(source_lang)}); see /v2/glossary-language-pairs"
            )
        entries_format = deepl.text("entries_format") or "tsv"
        store = _glossaries(request)
        await store.check_room(deepl.caller.tenant)  # a tenant at its quota: refused before its entries are read
        entries = await api.work.run(parse_entries, deepl.text("entries", required=True) or "", entries_format)
    except InvalidJobError as exc:
        raise _bad_request(exc) from None
    info = await store.create(deepl.caller.tenant, name, [Dictionary(source_lang, target_lang, entries)])
    return GlossaryBody.of(info)


@router.get("/glossaries", response_model=GlossaryList, responses=_ERRORS)
async def list_glossaries(request: Request, deepl: DeepLRequestDep) -> GlossaryList:
    """The tenant's glossaries of one language pair, oldest first (a multilingual one is ``/v3/glossaries``', as on
    DeepL: v2 knows glossaries of one pair only)."""
    infos = await _glossaries(request).list(deepl.caller.tenant)
    return GlossaryList(glossaries=[GlossaryBody.of(info) for info in infos if info.monolingual is not None])


async def _one_glossary(request: Request, deepl: DeepLRequest, glossary_id: str) -> tuple[GlossaryInfo, DictionaryInfo]:
    """The tenant's glossary ``glossary_id`` and its one dictionary: 404 if unknown or another tenant's, 400 for a
    multilingual glossary (v2 has no way to name one of its pairs)."""
    info = await _glossaries(request).info(deepl.caller.tenant, glossary_id)
    if info is None:
        raise ApiError(404, "glossary_not_found", f"glossary {glossary_id} not found")
    if info.monolingual is None:
        raise ApiError(
            400,
            "multilingual_glossary",
            f"glossary {glossary_id} has {len(info.dictionaries)} language pairs; the v2 glossary routes take "
            f"glossaries of one pair: use /v3/glossaries/{glossary_id}",
        )
    return info, info.monolingual


@router.get("/glossaries/{glossary_id}", response_model=GlossaryBody, responses=_ERRORS)
async def get_glossary(glossary_id: str, request: Request, deepl: DeepLRequestDep) -> GlossaryBody:
    """One of the tenant's glossaries; 404 if unknown or another tenant's."""
    info, _ = await _one_glossary(request, deepl, glossary_id)
    return GlossaryBody.of(info)


@router.get(
    "/glossaries/{glossary_id}/entries",
    response_class=Response,
    responses={200: {"content": {"text/tab-separated-values": {}}, "description": "the entries"}, **_ERRORS},
)
async def glossary_entries(glossary_id: str, request: Request, deepl: DeepLRequestDep, api: ServicesDep) -> Response:
    """The glossary's entries as TSV, ``source<TAB>target`` a line, in the order they were given."""
    _, dictionary = await _one_glossary(request, deepl, glossary_id)
    entries = await _glossaries(request).entries(
        deepl.caller.tenant, glossary_id, dictionary.source_lang, dictionary.target_lang
    )
    if entries is None:  # deleted since
        raise ApiError(404, "glossary_not_found", f"glossary {glossary_id} not found")
    tsv = await api.work.run(to_tsv, entries)
    return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")


@router.delete("/glossaries/{glossary_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_ERRORS)
async def delete_glossary(glossary_id: str, request: Request, deepl: DeepLRequestDep) -> Response:
    """Delete one of the tenant's glossaries of one pair; 404 if unknown or another tenant's."""
    await _one_glossary(request, deepl, glossary_id)
    if not await _glossaries(request).delete(deepl.caller.tenant, glossary_id):
        raise ApiError(404, "glossary_not_found", f"glossary {glossary_id} not found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/glossary-language-pairs", response_model=GlossaryLanguagePairs, responses=_ERRORS)
async def glossary_language_pairs(deepl: DeepLRequestDep) -> GlossaryLanguagePairs:
    """Every pair of two different languages of ``/v2/languages`` (lower case, as DeepL answers)."""
    codes = [language.code.lower() for language in SOURCE_LANGUAGES]
    return GlossaryLanguagePairs(
        supported_languages=[
            GlossaryLanguagePair(source_lang=source, target_lang=target)
            for source in codes
            for target in codes
            if source != target
        ]
    )


# Languages and usage -------------------------------------------------------------------------


@router.get(
    "/languages",
    response_model=list[LanguageBody],
    responses=_ERRORS,
    operation_id="deepl_languages",
    openapi_extra=query_field("type", {"enum": ["source", "target"]}, "which list (default source)"),
)
@router.post(
    "/languages",
    response_model=list[LanguageBody],
    responses=_ERRORS,
    operation_id="deepl_languages_post",
    openapi_extra=request_body(DeepLLanguagesBody),
)
async def languages(deepl: DeepLRequestDep, api: ServicesDep) -> list[LanguageBody]:
    """DeepL's languages: ``type=source`` (the default) or ``type=target`` (with ``supports_formality``).

    dragoman takes any BCP-47 language; this is the list DeepL clients show their users. A target has
    ``supports_formality`` where DeepL's has it and the model serving it can apply formality: its live workers'
    prompt profile reports the formality control, or no live worker reports yet (then as DeepL lists it, the rule
    ``formality`` on ``/v2/translate`` follows too). Weblate offers formal and informal variants from it.
    """
    kind = deepl.text("type") or "source"
    if kind not in ("source", "target"):
        raise ApiError(400, "bad_request", f"Value for 'type' not supported: {kind!r}; use source or target")
    if kind == "source":
        return [LanguageBody(language=language.code, name=language.name) for language in SOURCE_LANGUAGES]
    asked = [language for language in TARGET_LANGUAGES if language.supports_formality]
    codes = {language.code: to_bcp47(language.code, "target_lang") for language in asked}
    controls = await api.client.models.controls_by_target(AUTO_LANGUAGE, list(codes.values()), Lane.INTERACTIVE)
    applied = {code for code, target in codes.items() if _applies_formality(controls[target])}
    return [
        LanguageBody(language=language.code, name=language.name, supports_formality=language.code in applied)
        for language in TARGET_LANGUAGES
    ]


def _applies_formality(controls: frozenset[str] | None) -> bool:
    """Whether a model whose live workers report ``controls`` applies formality (unknown, ``None``: as DeepL)."""
    return controls is None or Control.FORMALITY.value in controls


@router.get("/usage", response_model=UsageBody, responses=_ERRORS, operation_id="deepl_usage")
@router.post("/usage", response_model=UsageBody, responses=_ERRORS, operation_id="deepl_usage_post")
async def usage(request: Request, deepl: DeepLRequestDep) -> UsageBody:
    """The tenant's source characters this calendar month (UTC; every finished job, as ``GET /v1/usage``
    counts them) and a ``character_limit`` no tenant reaches (dragoman has no quota)."""
    store: UsageStore = request.app.state.usage
    today = dt.datetime.now(dt.UTC).date()
    rows = await store.usage(today.replace(day=1), today, tenant=deepl.caller.tenant, group_by=())
    return UsageBody(character_count=sum(row.characters for row in rows))
