"""DeepL's v3 glossary routes: multilingual glossaries, one dictionary (language pair) each, on the same store.

The ``deepl`` SDKs' ``create_multilingual_glossary``, ``get_multilingual_glossary``,
``list_multilingual_glossaries``, ``get_multilingual_glossary_entries`` and
``delete_multilingual_glossary`` call these. A glossary made here is a glossary of the tenant's like a v2
one (:class:`storage.GlossaryStore`): the same quota, and ``glossary_id`` on ``/v2/translate`` (what the
SDK's ``translate_text(glossary=MultilingualGlossaryInfo)`` sends) takes its dictionary for the request's
pair. A v2 glossary is a v3 glossary of one dictionary; the v2 routes list and serve only those.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status

from api.deepl_glossary_entries import (
    MAX_GLOSSARY_BYTES,
    GlossaryEntriesError,
    glossary_name,
    parse_entries,
    to_tsv,
)
from api.deepl_languages import base_language, to_bcp47
from api.deepl_request import DeepLRequest, DeepLRequestDep
from api.deepl_schemas import (
    DeepLErrorBody,
    DictionaryEntriesBody,
    DictionaryEntriesList,
    MultilingualGlossaryBody,
    MultilingualGlossaryList,
)
from api.errors import ApiError
from api.services import ApiServices, services
from contract.controls import term_bytes
from contract.errors import InvalidJobError
from storage import Dictionary, GlossaryInfo, GlossaryStore

router = APIRouter(prefix="/v3", tags=["deepl"])
ServicesDep = Annotated[ApiServices, Depends(services)]

_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": DeepLErrorBody} for code in (400, 403, 404, 413, 429, 500, 503)
}
_DICTIONARY_FIELDS = "source_lang, target_lang, entries and entries_format (tsv or csv)"


def _glossaries(request: Request) -> GlossaryStore:
    store: GlossaryStore = request.app.state.glossaries
    return store


def _pair(source: object, target: object) -> tuple[str, str]:
    """A dictionary's pair as the store keys it (lower-case base languages); two different languages."""
    source_lang = base_language(to_bcp47(source, "source_lang"))
    target_lang = base_language(to_bcp47(target, "target_lang"))
    if source_lang == target_lang:
        raise InvalidJobError(
            f"a dictionary translates between two languages; source_lang and target_lang are the same language "
            f"({source_lang.upper()}); see /v2/glossary-language-pairs"
        )
    return source_lang, target_lang


def _asked_dictionaries(raw: object) -> list[tuple[str, str, str, str]]:
    """``dictionaries`` as sent: each one's pair, entries and format, checked (one per pair, its fields strings),
    and all of them within :data:`MAX_GLOSSARY_BYTES` together; nothing parsed yet."""
    if not isinstance(raw, list) or not raw:
        raise InvalidJobError(f"Parameter 'dictionaries' must be a non-empty list of objects of {_DICTIONARY_FIELDS}")
    asked: list[tuple[str, str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    size = 0
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidJobError(f"dictionary {index} must be an object of {_DICTIONARY_FIELDS}")
        entries, entries_format = item.get("entries"), item.get("entries_format") or "tsv"
        if not isinstance(entries, str) or not isinstance(entries_format, str):
            raise InvalidJobError(f"dictionary {index}: entries and entries_format must be strings")
        pair = _pair(item.get("source_lang"), item.get("target_lang"))
        if pair in seen:
            raise InvalidJobError(f"dictionary {index}: a second dictionary for {pair[0].upper()} -> {pair[1].upper()}")
        seen.add(pair)
        size += len(entries) if size + len(entries) > MAX_GLOSSARY_BYTES else term_bytes(entries)
        if size > MAX_GLOSSARY_BYTES:
            raise GlossaryEntriesError(
                f"the glossary's entries are over the {MAX_GLOSSARY_BYTES:,} bytes (10 MiB, UTF-8) a glossary may "
                "hold, its dictionaries together; split it into several glossaries"
            )
        asked.append((*pair, entries, entries_format))
    return asked


def _parsed(asked: list[tuple[str, str, str, str]]) -> list[Dictionary]:
    """Each dictionary's entries read (:func:`~api.deepl_glossary_entries.parse_entries`), a bad line named with its
    dictionary. Linear in the entries: run on the API's work threads."""
    dictionaries = []
    for index, (source_lang, target_lang, entries, entries_format) in enumerate(asked):
        try:
            parsed = parse_entries(entries, entries_format)
        except GlossaryEntriesError as exc:
            where = f"dictionary {index} ({source_lang.upper()} -> {target_lang.upper()})"
            raise GlossaryEntriesError(f"{where}: {exc}") from None
        dictionaries.append(Dictionary(source_lang, target_lang, parsed))
    return dictionaries


@router.post(
    "/glossaries", status_code=status.HTTP_201_CREATED, response_model=MultilingualGlossaryBody, responses=_ERRORS
)
async def create_glossary(request: Request, deepl: DeepLRequestDep, api: ServicesDep) -> MultilingualGlossaryBody:
    """Store a glossary of the tenant: ``name`` and ``dictionaries``, each ``source_lang``, ``target_lang``,
    ``entries`` in ``entries_format`` (``tsv``, the default, or ``csv``), one per pair. A bad entry is a 400 naming
    its dictionary and line; the dictionaries together hold at most 10 MiB of entries; the tenant's glossary quota
    counts the glossary once and all its terms (``413 glossary_quota_exceeded``, nothing stored)."""
    try:
        name = glossary_name(deepl.text("name", required=True) or "")
        asked = _asked_dictionaries(deepl.fields.get("dictionaries"))
        store = _glossaries(request)
        await store.check_room(deepl.caller.tenant)  # a tenant at its quota: refused before its entries are read
        dictionaries = await api.work.run(_parsed, asked)
    except InvalidJobError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    return MultilingualGlossaryBody.of(await store.create(deepl.caller.tenant, name, dictionaries))


@router.get("/glossaries", response_model=MultilingualGlossaryList, responses=_ERRORS)
async def list_glossaries(request: Request, deepl: DeepLRequestDep) -> MultilingualGlossaryList:
    """The tenant's glossaries, oldest first, each with its dictionaries (v2 ones too: one dictionary each)."""
    infos = await _glossaries(request).list(deepl.caller.tenant)
    return MultilingualGlossaryList(glossaries=[MultilingualGlossaryBody.of(info) for info in infos])


async def _glossary(request: Request, deepl: DeepLRequest, glossary_id: str) -> GlossaryInfo:
    """The tenant's glossary ``glossary_id``; 404 if unknown or another tenant's."""
    info = await _glossaries(request).info(deepl.caller.tenant, glossary_id)
    if info is None:
        raise ApiError(404, "glossary_not_found", f"glossary {glossary_id} not found")
    return info


@router.get("/glossaries/{glossary_id}", response_model=MultilingualGlossaryBody, responses=_ERRORS)
async def get_glossary(glossary_id: str, request: Request, deepl: DeepLRequestDep) -> MultilingualGlossaryBody:
    """One of the tenant's glossaries with its dictionaries; 404 if unknown or another tenant's."""
    return MultilingualGlossaryBody.of(await _glossary(request, deepl, glossary_id))


@router.get("/glossaries/{glossary_id}/entries", response_model=DictionaryEntriesList, responses=_ERRORS)
async def glossary_entries(
    glossary_id: str, request: Request, deepl: DeepLRequestDep, api: ServicesDep
) -> DictionaryEntriesList:
    """The entries of the glossary's dictionary for ``source_lang`` and ``target_lang`` (query), as TSV in the order
    they were given; 404 if the glossary is unknown or has no dictionary for the pair."""
    try:
        pair = _pair(deepl.text("source_lang", required=True), deepl.text("target_lang", required=True))
    except InvalidJobError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    info = await _glossary(request, deepl, glossary_id)
    entries = await _glossaries(request).entries(deepl.caller.tenant, info.id, *pair)
    if entries is None:
        held = ", ".join(f"{d.source_lang.upper()} -> {d.target_lang.upper()}" for d in info.dictionaries)
        raise ApiError(
            404,
            "dictionary_not_found",
            f"glossary {glossary_id} has no dictionary for {pair[0].upper()} -> {pair[1].upper()} (it has {held})",
        )
    tsv = await api.work.run(to_tsv, entries)
    return DictionaryEntriesList(
        dictionaries=[DictionaryEntriesBody(source_lang=pair[0], target_lang=pair[1], entries=tsv)]
    )


@router.delete("/glossaries/{glossary_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_ERRORS)
async def delete_glossary(glossary_id: str, request: Request, deepl: DeepLRequestDep) -> Response:
    """Delete one of the tenant's glossaries, every dictionary of it; 404 if unknown or another tenant's."""
    if not await _glossaries(request).delete(deepl.caller.tenant, glossary_id):
        raise ApiError(404, "glossary_not_found", f"glossary {glossary_id} not found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
