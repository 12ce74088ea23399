"""Per-job controls: validation at submit and on the wire, and which glossary terms a translation missed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contract.controls import (
    AUTO_LANGUAGE,
    MAX_CONTEXT_CHARS,
    MAX_GLOSSARY_TERMS,
    MAX_TERM_BYTES,
    Formality,
    glossary_misses,
    validate_context,
    validate_formality,
    validate_glossary,
    validate_memory,
)
from contract.errors import InvalidGlossaryError, InvalidJobError, MalformedEntryError, UnsupportedLanguageError
from contract.schemas import build_job_spec
from contract.wire import decode_job_entry, encode_job_entry


def test_a_glossary_is_trimmed_and_kept_in_order() -> None:
    assert validate_glossary({" cat ": " chat", "dog": "chien"}) == {"cat": "chat", "dog": "chien"}
    assert validate_glossary(None) == {}


def test_a_term_may_be_as_long_as_deepl_allows() -> None:
    """DeepL takes terms of up to 1,024 UTF-8 bytes (issue 49: 200 characters were refused)."""
    long_term = "x" * MAX_TERM_BYTES
    assert validate_glossary({long_term: "ü" * 512}) == {long_term: "ü" * 512}


@pytest.mark.parametrize(
    ("glossary", "reason"),
    [
        (["cat", "chat"], "must be an object"),
        ({"cat": 1}, "must map a string to a string"),
        ({"cat": None}, "must map a string to a string"),
        ({"": "chat"}, "has an empty term"),
        ({"cat": "   "}, "has an empty term"),
        ({"cat\nnip": "herbe"}, "line break or control character"),
        ({"x" * (MAX_TERM_BYTES + 1): "y"}, "1,025 bytes \\(UTF-8\\); at most 1,024"),
        ({"cat": "ü" * 513}, "1,026 bytes"),  # 513 characters of two bytes each
        ({f"term {i}": "t" for i in range(MAX_GLOSSARY_TERMS + 1)}, f"at most {MAX_GLOSSARY_TERMS} are allowed"),
        ({"cat": "chat", " cat": "minou"}, "is given twice"),
    ],
)
def test_bad_glossaries_are_refused_with_the_reason(glossary: Any, reason: str) -> None:
    with pytest.raises(InvalidGlossaryError, match=reason):
        validate_glossary(glossary)


def test_context_formality_and_memory_are_checked() -> None:
    assert validate_context("  ") is None
    assert validate_context("Earlier sentence.") == "Earlier sentence."
    with pytest.raises(InvalidJobError, match="at most 4,000"):
        validate_context("x" * (MAX_CONTEXT_CHARS + 1))
    with pytest.raises(InvalidJobError, match="must be a string"):
        validate_context(["a"])
    assert validate_formality("formal") is Formality.FORMAL
    assert validate_formality("default") is None
    with pytest.raises(InvalidJobError, match="'formal', 'informal' or 'default'"):
        validate_formality("polite")
    assert validate_memory(None) is True
    with pytest.raises(InvalidJobError, match="true or false"):
        validate_memory("no")


def test_auto_is_a_source_language_only() -> None:
    spec = build_job_spec("00000000-0000-4000-8000-000000000001", "Bonjour", "AUTO", "en", max_chars=100)
    assert spec.source_lang == AUTO_LANGUAGE
    with pytest.raises(UnsupportedLanguageError):
        build_job_spec("00000000-0000-4000-8000-000000000001", "Bonjour", "fr", "auto", max_chars=100)


def test_controls_travel_on_the_wire() -> None:
    spec = build_job_spec(
        "00000000-0000-4000-8000-000000000002",
        "The cat sleeps.",
        "auto",
        "fr",
        max_chars=100,
        glossary={"cat": "chat"},
        context="A story about pets.",
        formality="informal",
        memory=False,
    )
    fields = encode_job_entry(spec)
    payload = json.loads(fields["payload"])
    assert payload["glossary"] == {"cat": "chat"} and payload["memory"] is False
    assert decode_job_entry(fields, max_chars=100) == spec


def test_a_plain_entry_has_no_controls() -> None:
    spec = build_job_spec("00000000-0000-4000-8000-000000000003", "Hi", "en", "fr", max_chars=100)
    payload = json.loads(encode_job_entry(spec)["payload"])
    assert not {"glossary", "context", "formality", "memory"} & set(payload)
    decoded = decode_job_entry(encode_job_entry(spec), max_chars=100)
    assert decoded.glossary == {} and decoded.context is None and decoded.formality is None and decoded.memory


def test_a_bad_glossary_on_the_wire_is_a_malformed_entry() -> None:
    payload = {"text": "Hi", "source_lang": "en", "target_lang": "fr", "glossary": {"Hi": 3}}
    fields = {"v": "1", "id": "00000000-0000-4000-8000-000000000004", "payload": json.dumps(payload)}
    with pytest.raises(MalformedEntryError, match="must map a string to a string"):
        decode_job_entry(fields, max_chars=100)


def test_glossary_misses_name_the_terms_the_translation_lacks() -> None:
    glossary = {"cat": "chat", "dog": "chien", "bird": "oiseau"}
    # "bird" is not in the source: it cannot be missed.
    assert glossary_misses(glossary, "The Cat and the dog.", "Le CHAT et le toutou.") == ["dog"]
    assert glossary_misses(glossary, "The cat.", "Le chat.") == []
    assert glossary_misses({}, "The cat.", "Le minou.") == []
    # Composed and decomposed forms of the same letters match.
    assert glossary_misses({"cafe": "caf\u00e9"}, "a cafe", "un cafe\u0301") == []
