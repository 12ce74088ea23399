"""DeepL API v2's response bodies, as its SDKs read them (field names and types are DeepL's)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from storage import DictionaryInfo, GlossaryInfo

DEEPL_CHARACTER_LIMIT = 1_000_000_000_000
"""``character_limit`` on ``/v2/usage``: dragoman has no billing period or quota, so a limit no tenant reaches
(DeepL clients that compare count and limit never stop)."""


class TextTranslation(BaseModel):
    """One translated text of ``POST /v2/translate``."""

    detected_source_language: str = Field(description="the source language, DeepL's upper-case base code (EN, ZH)")
    text: str
    billed_characters: int = Field(description="the source text's characters (Unicode code points)")
    model_type_used: str | None = Field(
        None, description="answered when the request sent model_type: quality_optimized or latency_optimized"
    )


class TranslateResponse(BaseModel):
    """``POST /v2/translate``: the translations, in the order of the texts."""

    translations: list[TextTranslation]


class DocumentHandleBody(BaseModel):
    """``POST /v2/document``: the id to follow the document by, and the key every later call must send."""

    document_id: str
    document_key: str


class DocumentStatusBody(BaseModel):
    """``POST /v2/document/{document_id}``: where the document stands."""

    document_id: str
    status: Literal["queued", "translating", "done", "error"]
    seconds_remaining: int | None = Field(None, description="estimated, while translating")
    error_message: str | None = Field(None, description="why, when the status is error")
    detected_source_language: str | None = Field(
        None, description="uploaded without source_lang: the language detected in the document, once it is split"
    )
    billed_characters: int | None = Field(
        None, description="done: the source characters of the document's segments, as /v2/usage counts them"
    )


class GlossaryBody(BaseModel):
    """A stored glossary, as ``/v2/glossaries`` describes it."""

    glossary_id: str
    name: str
    ready: bool = True
    source_lang: str
    target_lang: str
    creation_time: str = Field(description="ISO 8601 with microseconds and offset")
    entry_count: int

    @classmethod
    def of(cls, info: GlossaryInfo) -> GlossaryBody:
        """The body of a stored glossary of one dictionary (v2 knows no other)."""
        dictionary = info.monolingual
        assert dictionary is not None, "a v2 glossary has one language pair"
        return cls(
            glossary_id=info.id,
            name=info.name,
            source_lang=dictionary.source_lang,
            target_lang=dictionary.target_lang,
            creation_time=info.created_at.isoformat(timespec="microseconds"),
            entry_count=dictionary.entry_count,
        )


class DictionaryBody(BaseModel):
    """One language pair of a ``/v3/glossaries`` glossary (DeepL's lower-case base codes)."""

    source_lang: str
    target_lang: str
    entry_count: int

    @classmethod
    def of(cls, dictionary: DictionaryInfo) -> DictionaryBody:
        """The body of a stored dictionary."""
        return cls(
            source_lang=dictionary.source_lang, target_lang=dictionary.target_lang, entry_count=dictionary.entry_count
        )


class MultilingualGlossaryBody(BaseModel):
    """A stored glossary, as ``/v3/glossaries`` describes it: its dictionaries, each a language pair."""

    glossary_id: str
    name: str
    dictionaries: list[DictionaryBody]
    creation_time: str = Field(description="ISO 8601 with microseconds and offset")

    @classmethod
    def of(cls, info: GlossaryInfo) -> MultilingualGlossaryBody:
        """The body of a stored glossary."""
        return cls(
            glossary_id=info.id,
            name=info.name,
            dictionaries=[DictionaryBody.of(dictionary) for dictionary in info.dictionaries],
            creation_time=info.created_at.isoformat(timespec="microseconds"),
        )


class MultilingualGlossaryList(BaseModel):
    """``GET /v3/glossaries``: the caller's glossaries, oldest first."""

    glossaries: list[MultilingualGlossaryBody]


class DictionaryEntriesBody(BaseModel):
    """One dictionary's entries, as ``GET /v3/glossaries/{id}/entries`` answers them: TSV, a line an entry."""

    source_lang: str
    target_lang: str
    entries: str
    entries_format: Literal["tsv"] = "tsv"


class DictionaryEntriesList(BaseModel):
    """``GET /v3/glossaries/{id}/entries``: the asked pair's dictionary."""

    dictionaries: list[DictionaryEntriesBody]


class GlossaryList(BaseModel):
    """``GET /v2/glossaries``: the caller's glossaries, oldest first."""

    glossaries: list[GlossaryBody]


class GlossaryLanguagePair(BaseModel):
    """One pair glossaries may be created for."""

    source_lang: str
    target_lang: str


class GlossaryLanguagePairs(BaseModel):
    """``GET /v2/glossary-language-pairs``."""

    supported_languages: list[GlossaryLanguagePair]


class LanguageBody(BaseModel):
    """One language of ``/v2/languages`` (``supports_formality`` on target languages only)."""

    language: str
    name: str
    supports_formality: bool | None = None


class UsageBody(BaseModel):
    """``GET /v2/usage``: the tenant's source characters this calendar month (UTC) and the documented limit."""

    character_count: int
    character_limit: int = DEEPL_CHARACTER_LIMIT


class DeepLErrorBody(BaseModel):
    """Every ``/v2/`` error: DeepL's ``message`` (its SDKs show it), and dragoman's stable ``code``."""

    message: str
    code: str
