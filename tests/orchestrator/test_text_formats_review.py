"""Inputs real files have that broke the text formats' fidelity (issue 36's review).

Each test is the smallest input that showed its bug: a gettext header whose ``Plural-Forms:``
value msgcat wrapped over two strings (Slavic rules are longer than a line), a header written as
one string, a byte order mark before a catalogue, a JSON file or a Markdown heading, and
Markdown's hard line breaks (two spaces or a backslash before the line end).
"""

from __future__ import annotations

import json

import pytest

from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton
from tests.msgfmt_check import assert_msgfmt_accepts
from tests.orchestrator.test_document_formats import shout

_RUSSIAN_RULE = "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"

# A Russian catalogue as msgcat/msgmerge write it: the Plural-Forms value wrapped at 79 columns.
WRAPPED_HEADER_PO = r"""msgid ""
msgstr ""
"Language: ru\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && "
"n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\n"

msgid "%d file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""
msgstr[2] ""
"""


def _translated(source: str, fmt: str, target: str) -> tuple[list[str], str]:
    """What the model is sent and the document assembled for ``target`` (identity round trip checked)."""
    skeleton = split_document(source, fmt, 200)
    assert skeleton.source() == source
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    assert stored.source() == source
    return [s.text for s in stored.segments], stored.assemble([shout(s.text) for s in stored.segments], target)


def _header_fields(po: str) -> dict[str, list[str]]:
    """The header entry's fields (name -> every value it has), read the way gettext reads them."""
    header = po.split("\n\n", 1)[0].split("msgstr ", 1)[1]
    text = "".join(json.loads(line) for line in header.splitlines())
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.strip())
    return fields


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("ru", _RUSSIAN_RULE),
        ("ja", "nplurals=1; plural=0;"),
    ],
)
def test_a_wrapped_plural_forms_value_is_replaced_whole(target: str, rule: str) -> None:
    _, out = _translated(WRAPPED_HEADER_PO, "po", target)
    fields = _header_fields(out)
    assert fields["Plural-Forms"] == [rule]
    assert fields["Language"] == [target]
    assert_msgfmt_accepts(out)


def test_a_header_in_one_string_names_the_target_once() -> None:
    po = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\nLanguage: de\\n"\n\nmsgid "Hello"\nmsgstr ""\n'
    _, out = _translated(po, "po", "fr")
    fields = _header_fields(out)
    assert fields["Language"] == ["fr"]
    assert fields["Plural-Forms"] == ["nplurals=2; plural=(n > 1);"]
    assert_msgfmt_accepts(out)


@pytest.mark.parametrize(
    ("fmt", "source", "segments"),
    [
        ("po", '\ufeffmsgid ""\nmsgstr ""\n"Language: en\\n"\n\nmsgid "Hello"\nmsgstr ""\n', ["Hello"]),
        ("json", '\ufeff{"greeting": "Hello"}', ["Hello"]),
        ("md", "\ufeff# Title\n\nSome text.\n", ["Title", "Some text."]),
    ],
)
def test_a_byte_order_mark_stays_out_of_the_model_and_in_the_translation(
    fmt: str, source: str, segments: list[str]
) -> None:
    sent, out = _translated(source, fmt, "de")
    assert sent == segments
    assert out.startswith("\ufeff") and out.count("\ufeff") == 1


@pytest.mark.parametrize(
    ("source", "translated"),
    [
        ("Jane Doe  \n1 Main Street\n", "JANE DOE  \n1 MAIN STREET\n"),
        ("Jane Doe\\\n1 Main Street\n", "JANE DOE\\\n1 MAIN STREET\n"),
        ("- Jane Doe   \r\n  1 Main Street\r\n", "- JANE DOE   \r\n  1 MAIN STREET\r\n"),
        ("> Jane Doe  \n> 1 Main Street\n", "> JANE DOE  \n> 1 MAIN STREET\n"),
    ],
)
def test_a_markdown_hard_line_break_stays_a_line_break(source: str, translated: str) -> None:
    sent, out = _translated(source, "md", "de")
    assert sent == ["Jane Doe<x1/>1 Main Street"]
    assert out == translated


def test_an_escaped_backslash_at_a_line_end_is_text_and_its_break_soft() -> None:
    sent, out = _translated("C:\\\\\nnext line\n", "md", "de")
    assert sent == ["C:\\\\ next line"]
    assert out == "C:\\\\ NEXT LINE\n"


_TRANSLATED_RUSSIAN = (
    WRAPPED_HEADER_PO.replace(
        'msgstr[0] ""\nmsgstr[1] ""\nmsgstr[2] ""', ('msgstr[0] "%d файл"\nmsgstr[1] "%d файла"\nmsgstr[2] "%d файлов"')
    )
    + '\nmsgid "Bye"\nmsgstr ""\n'
)


def test_a_catalogue_translated_into_another_language_is_refused_unless_retranslated() -> None:
    # Russian translations kept under "Language: ja", three forms where the header says one: msgfmt -c fails
    with pytest.raises(InvalidJobError, match=r"already in ru .*--retranslate"):
        split_document(_TRANSLATED_RUSSIAN, "po", 200, target_lang="ja")
    skeleton = split_document(_TRANSLATED_RUSSIAN, "po", 200, target_lang="ja", retranslate=True)
    out = skeleton.assemble([shout(s.text) for s in skeleton.segments], "ja")
    assert "файл" not in out
    assert_msgfmt_accepts(out)


@pytest.mark.parametrize("target", ["ru", "ru-RU"])
def test_a_catalogue_in_the_target_language_fills_its_gaps(target: str) -> None:
    skeleton = split_document(_TRANSLATED_RUSSIAN, "po", 200, target_lang=target)
    assert [s.text for s in skeleton.segments] == ["Bye"]


def test_a_template_or_an_untranslated_catalogue_goes_to_any_language() -> None:
    assert [s.text for s in split_document(WRAPPED_HEADER_PO, "po", 200, target_lang="ja").segments] == [
        "<x1/> file",
        "<x1/> files",
    ]
