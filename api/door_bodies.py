"""The DeepL and LibreTranslate doors' request bodies, as the OpenAPI schema (``/openapi.json``, ``/docs``) shows them.

These doors read their fields themselves (:mod:`api.deepl_request`, :mod:`api.libretranslate_fields`): their
clients send the same fields as a JSON object, a URL-encoded form or a multipart form, and the key may ride in
the body, so FastAPI cannot infer a body from the route's signature and the schema showed none. The models
here describe each body (a route's ``openapi_extra``, :func:`request_body`), so that ``/docs`` lists the
fields and the fuzz run of every route (``tests/api/test_fuzz_every_route.py``) sends meaningful bodies,
JSON and forms alike. They validate nothing: the routes' own checks answer a bad field in the door's shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, Field, WithJsonSchema

from api.deepl_languages import SOURCE_LANGUAGES, TARGET_LANGUAGES


def _language(codes: list[str], description: str) -> Any:
    """A language field: one of ``codes`` (what the door's clients list), or any BCP-47 code dragoman reads."""
    schema = {"anyOf": [{"enum": codes}, {"type": "string", "maxLength": 100}], "description": description}
    return WithJsonSchema(schema)


_DEEPL_SOURCES = [language.code for language in SOURCE_LANGUAGES]
_DEEPL_TARGETS = [language.code for language in TARGET_LANGUAGES]
_LIBRE_CODES = [language.code.lower() for language in SOURCE_LANGUAGES]

DeepLSource = Annotated[str, _language(_DEEPL_SOURCES, "DeepL's code (EN, DE), or any BCP-47 code")]
DeepLTarget = Annotated[str, _language(_DEEPL_TARGETS, "DeepL's code (EN-GB, DE), or any BCP-47 code")]
LibreSource = Annotated[str, _language(["auto", *_LIBRE_CODES], "a language code, or auto (detected)")]
LibreTarget = Annotated[str, _language(_LIBRE_CODES, "a language code")]
Texts = list[str] | str
Upload = Annotated[bytes, WithJsonSchema({"type": "string", "format": "binary"})]
Formality = Literal["default", "more", "less", "prefer_more", "prefer_less"]


class DeepLTranslateBody(BaseModel):
    """``POST /v2/translate``: the texts and how to translate them (DeepL's fields; the unlisted ones are ignored)."""

    text: Texts = Field(description="one text, or several (a JSON list, or the field repeated in a form)")
    target_lang: DeepLTarget
    source_lang: DeepLSource | None = Field(None, description="absent: detected")
    context: str | None = Field(None, description="text the model reads but does not translate")
    formality: Formality | None = None
    glossary_id: str | None = Field(None, description="one of the tenant's glossaries (/v2/glossaries)")
    tag_handling: Literal["xml", "html"] | None = Field(None, description="keep the markup byte for byte")
    ignore_tags: Texts | None = Field(None, description="elements left untranslated (a list, or comma-separated)")
    split_sentences: str | None = Field(None, description="accepted, no effect")
    preserve_formatting: bool | None = Field(None, description="accepted, no effect")
    model_type: str | None = Field(None, description="accepted, no effect")


class DeepLDocumentBody(BaseModel):
    """``POST /v2/document`` (multipart): the document and its target."""

    file: Upload = Field(description="the document; its file name's suffix says its format (.txt, .docx, ...)")
    target_lang: DeepLTarget
    source_lang: DeepLSource | None = Field(None, description="absent: detected once it is split")
    formality: Formality | None = None
    glossary_id: str | None = None
    output_format: str | None = Field(None, description="the input's own format only")
    context: str | None = None


class DeepLDocumentKeyBody(BaseModel):
    """``POST /v2/document/{document_id}`` and ``.../result``: the key the upload answered."""

    document_key: str


class DeepLGlossaryBody(BaseModel):
    """``POST /v2/glossaries``: a glossary of the tenant's."""

    name: str
    source_lang: DeepLSource
    target_lang: DeepLSource
    entries: str = Field(description="one entry a line: source<TAB>target (tsv) or source,target (csv)")
    entries_format: Literal["tsv", "csv"] = "tsv"


class DeepLLanguagesBody(BaseModel):
    """``/v2/languages``: which list (a form body, as DeepL's Python SDK sends it, or the query)."""

    type: Literal["source", "target"] = "source"


class LibreTranslateBody(BaseModel):
    """``POST /translate``: LibreTranslate's fields (its key as ``api_key`` here, or ``Authorization: Bearer``)."""

    q: Texts = Field(description="one text (answered as a string) or a list (answered as a list, in order)")
    source: LibreSource
    target: LibreTarget
    format: Literal["text", "html"] = "text"
    alternatives: int | None = Field(None, ge=0, description="answered as empty lists: a job has one translation")
    api_key: str | None = None


class LibreDetectBody(BaseModel):
    """``POST /detect``: the text whose language to tell."""

    q: Texts
    api_key: str | None = None


class LibreFileBody(BaseModel):
    """``POST /translate_file`` (multipart): the document and its languages."""

    file: Upload = Field(description="the document; its file name's suffix says its format")
    source: LibreSource
    target: LibreTarget
    api_key: str | None = None


DOOR_BODIES: tuple[type[BaseModel], ...] = (
    DeepLTranslateBody,
    DeepLDocumentBody,
    DeepLDocumentKeyBody,
    DeepLGlossaryBody,
    DeepLLanguagesBody,
    LibreTranslateBody,
    LibreDetectBody,
    LibreFileBody,
)
"""Every body here: :func:`add_door_bodies` puts each in the schema's components, by its class name."""


def request_body(model: type[BaseModel], *, multipart: bool = False, json: bool = True) -> dict[str, Any]:
    """A route's ``openapi_extra`` describing its body as ``model`` (one of :data:`DOOR_BODIES`, a component of the
    schema): as JSON and as a form (URL-encoded, or multipart for a body with a file, whose part is named
    ``document.txt`` in the schema's example)."""
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    content: dict[str, Any] = {}
    if json:
        content["application/json"] = {"schema": schema}
    if multipart:
        disposition = 'form-data; name="file"; filename="document.txt"'
        content["multipart/form-data"] = {
            "schema": schema,
            "encoding": {
                "file": {
                    "contentType": "text/plain",
                    "headers": {"Content-Disposition": {"schema": {"type": "string", "example": disposition}}},
                }
            },
        }
    else:
        content["application/x-www-form-urlencoded"] = {"schema": schema}
    return {"requestBody": {"required": True, "content": content}}


def add_door_bodies(app: FastAPI) -> None:
    """Make ``app``'s OpenAPI schema hold :data:`DOOR_BODIES` as components, which the doors' routes refer to
    (FastAPI adds only the models a route's signature names). FastAPI's own way: wrapping ``app.openapi``."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schemas = build().setdefault("components", {}).setdefault("schemas", {})
            for model in DOOR_BODIES:
                schemas[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]


def query_field(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A route's ``openapi_extra`` naming one query parameter the route reads itself."""
    return {
        "parameters": [{"name": name, "in": "query", "required": False, "schema": schema, "description": description}]
    }
