"""Catalogues and resource files: gettext headers and plural forms for the target, placeholders, JSON, XLIFF.

Each test is built from the smallest input that showed a bug: the header of a translated
template (``Language:`` empty, ``Plural-Forms: nplurals=INTEGER``), plural entries with the
template's number of forms, platform placeholders, JSON values sent raw, XLIFF's missing target
language and its ``xml:space="preserve"`` whitespace.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree

import pytest

from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton
from tests.msgfmt_check import assert_msgfmt_accepts
from tests.orchestrator.test_document_formats import PO, shout

# `dragoman translate messages.pot --from en --to ja -o ja.po` (the CLI's example): a template as
# xgettext writes it, with the header a template has.
MESSAGES_POT = r"""# SOME DESCRIPTIVE TITLE.
# Copyright (C) YEAR THE PACKAGE'S COPYRIGHT HOLDER
# This file is distributed under the same license as the PACKAGE package.
# FIRST AUTHOR <EMAIL@ADDRESS>, YEAR.
#
#, fuzzy
msgid ""
msgstr ""
"Project-Id-Version: PACKAGE VERSION\n"
"Report-Msgid-Bugs-To: \n"
"POT-Creation-Date: 2026-11-26 04:16+0000\n"
"PO-Revision-Date: YEAR-MO-DA HO:MI+ZONE\n"
"Last-Translator: FULL NAME <EMAIL@ADDRESS>\n"
"Language-Team: LANGUAGE <LL@li.org>\n"
"Language: \n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=CHARSET\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

#: hello.c:3
#, c-format
msgid "Hello, world!\n"
msgstr ""

#: hello.c:4
#, c-format
msgid "%d file removed"
msgid_plural "%d files removed"
msgstr[0] ""
msgstr[1] ""

#: hello.c:5
#, c-format
msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

#: hello.c:6
#, c-format
msgid "%1$s on %2$s"
msgstr ""
"""


def _translated(source: str, fmt: str, target: str, *, retranslate: bool = False) -> tuple[list[str], str]:
    """What the model is sent and the document assembled for ``target`` (identity round trip checked)."""
    skeleton = split_document(source, fmt, 200, retranslate=retranslate)
    assert skeleton.source() == source
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    assert stored.source() == source
    return [s.text for s in stored.segments], stored.assemble([shout(s.text) for s in stored.segments], target)


def _plural_forms(po: str, msgid: str) -> list[str]:
    """The ``msgstr[N]`` strings of the entry whose ``msgid`` is ``msgid``, in order."""
    entry = po.split(f'msgid "{msgid}"\n', 1)[1].split("\n\n", 1)[0]
    return re.findall(r'^msgstr\[\d+\] (".*")$', entry, re.MULTILINE)


@pytest.mark.parametrize(
    ("target", "header", "forms"),
    [
        ("ja", "nplurals=1; plural=0;", 1),
        ("pl", "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);", 3),
        ("ar", "nplurals=6;", 6),
        ("pt-BR", "nplurals=2; plural=(n > 1);", 2),
    ],
)
def test_a_translated_template_names_its_language_and_plural_forms_and_passes_msgfmt(
    target: str, header: str, forms: int
) -> None:
    _, out = _translated(MESSAGES_POT, "po", target)
    language = target.replace("-", "_")
    assert f'"Language: {language}\\n"\n' in out
    assert f'"Plural-Forms: {header}' in out and "INTEGER" not in out
    assert '"Content-Type: text/plain; charset=UTF-8\\n"' in out  # what the translation is written in
    assert '#, fuzzy\nmsgid ""' not in out  # a translated header is no template's any more
    assert len(_plural_forms(out, "%d file removed")) == forms
    assert len(_plural_forms(out, "One file")) == forms
    assert_msgfmt_accepts(out, f"{target}.po")


def test_the_singular_goes_only_where_it_is_right() -> None:
    # Polish: form 0 is for 1 alone, so "One file" may stand there; the others carry the number.
    _, polish = _translated(MESSAGES_POT, "po", "pl")
    assert _plural_forms(polish, "One file") == ['"ONE FILE"', '"%d FILES"', '"%d FILES"']
    # Russian: form 0 also serves 21, 31...: only a singular that carries the number fits it.
    _, russian = _translated(MESSAGES_POT, "po", "ru")
    assert _plural_forms(russian, "One file") == ['"%d FILES"'] * 3
    assert _plural_forms(russian, "%d file removed") == [
        '"%d FILE REMOVED"',
        '"%d FILES REMOVED"',
        '"%d FILES REMOVED"',
    ]
    # Japanese: one form for every number, the plural's.
    _, japanese = _translated(MESSAGES_POT, "po", "ja")
    assert _plural_forms(japanese, "One file") == ['"%d FILES"']


def test_a_singular_with_other_placeholders_than_the_plural_never_stands_for_a_form() -> None:
    # binutils (bg): the singular says %<PRIu64>, the plural %<PRId64>; msgfmt -c checks every form against the plural
    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n#, c-format\n'
    entry = 'msgid "contains %<PRIu64> entry"\nmsgid_plural "contains %<PRId64> entries"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    _, out = _translated(header + entry, "po", "ar")
    assert _plural_forms(out, "contains %<PRIu64> entry") == ['"CONTAINS %<PRId64> ENTRIES"'] * 6
    assert_msgfmt_accepts(out)


def test_a_plural_entry_half_translated_stays_untranslated() -> None:
    skeleton = split_document(MESSAGES_POT, "po", 200)
    translations = [shout(s.text) for s in skeleton.segments]
    translations[2] = None  # "%d files removed" failed
    out = skeleton.assemble(translations, "pl")
    assert _plural_forms(out, "%d file removed") == ['""', '""', '""']
    assert_msgfmt_accepts(out)


def test_plural_entries_are_two_segments_whatever_the_template_had() -> None:
    three_forms = 'msgid "One day"\nmsgid_plural "%d days"\nmsgstr[0] ""\nmsgstr[1] ""\nmsgstr[2] ""\n'
    sent, out = _translated(three_forms, "po", "ja")
    assert sent == ["One day", "<x1/> days"]
    assert out.endswith('\nmsgid "One day"\nmsgid_plural "%d days"\nmsgstr[0] "%d DAYS"\n')
    assert_msgfmt_accepts(out)


def test_a_retranslated_catalogue_names_its_new_language() -> None:
    german = (
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'
        'msgid "Open"\nmsgstr "Öffnen"\n\nmsgid "File"\nmsgid_plural "Files"\nmsgstr[0] "Datei"\nmsgstr[1] "Dateien"\n'
    )
    _, out = _translated(german, "po", "pl", retranslate=True)
    assert '"Language: pl\\n"' in out and "nplurals=3;" in out
    assert 'msgstr "OPEN"' in out and _plural_forms(out, "File") == ['"FILE"', '"FILES"', '"FILES"']


def test_a_catalogue_in_the_target_language_keeps_its_own_plural_rule() -> None:
    # Weblate's four-form Polish rule: babel says three; the entries translated already have four
    rule = (
        "nplurals=4; plural=(n==1 ? 0 : (n%10>=2 && n%10<=4) && (n%100<12 || n%100>14) ? 1 : n!=1 && "
        "(n%10>=0 && n%10<=1) || (n%10>=5 && n%10<=9) || (n%100>=12 && n%100<=14) ? 2 : 3);"
    )
    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n"Language: pl\\n"\n'
    header += f'"Plural-Forms: {rule}\\n"\n\n'
    done = 'msgid "%d day"\nmsgid_plural "%d days"\n' + "".join(f'msgstr[{n}] "%d dni"\n' for n in range(4))
    todo = 'msgid "%d hour"\nmsgid_plural "%d hours"\nmsgstr[0] ""\nmsgstr[1] ""\nmsgstr[2] ""\nmsgstr[3] ""\n'
    _, out = _translated(header + done + "\n" + todo, "po", "pl")
    assert f'"Plural-Forms: {rule}\\n"' in out
    assert _plural_forms(out, "%d hour") == ['"%d HOUR"', '"%d HOURS"', '"%d HOURS"', '"%d HOURS"']
    assert_msgfmt_accepts(out)


def test_a_header_without_the_fields_gets_them() -> None:
    _, out = _translated(PO, "po", "fr")
    added = '"Language: fr\\n"\n"Plural-Forms: nplurals=2; plural=(n > 1);\\n"\n'
    assert '"Content-Type: text/plain; charset=UTF-8\\n"\n' + added in out


def test_a_catalogue_without_a_header_gets_one() -> None:
    _, out = _translated('msgid "Open"\nmsgstr ""\n', "po", "de")
    assert out.startswith('msgid ""\nmsgstr ""\n"Language: de\\n"\n') and out.endswith(
        '\nmsgid "Open"\nmsgstr "OPEN"\n'
    )
    assert_msgfmt_accepts(out)
    assert_msgfmt_accepts(out)


def test_line_breaks_around_a_message_frame_its_translation() -> None:
    # msgfmt -c: "msgid" and "msgstr" entries must both begin and end with '\n'; a model trims them.
    catalogue = 'msgid "\\nUsage: tool FILE\\n"\nmsgstr ""\n'
    sent, _ = _translated(catalogue, "po", "de")
    assert sent == ["Usage: tool FILE"]
    skeleton = split_document(catalogue, "po", 200)
    trimmed = skeleton.assemble(["Aufruf: tool DATEI"], "de")  # the model's answer, without the line breaks
    assert trimmed.endswith('msgstr "\\nAufruf: tool DATEI\\n"\n')
    assert_msgfmt_accepts(trimmed)


def test_spaces_around_a_message_frame_its_translation() -> None:
    # coreutils' " (backup: %s)" is joined to a file name: the real model's answer dropped the space.
    catalogue = 'msgid " (backup: %s)  "\nmsgstr ""\n'
    sent, _ = _translated(catalogue, "po", "fr")
    assert sent == ["(backup: <x1/>)"]
    trimmed = split_document(catalogue, "po", 200).assemble(["(sauvegarde : <x1/>)"], "fr")
    assert trimmed.endswith('msgstr " (sauvegarde : %s)  "\n')


def test_the_header_is_untouched_until_something_is_translated() -> None:
    skeleton = split_document(MESSAGES_POT, "po", 200)
    assert skeleton.assemble([None] * len(skeleton.segments)) == MESSAGES_POT


@pytest.mark.parametrize(
    ("message", "codes"),
    [
        ("Read %I64d bytes at 0x%08<PRIx64>", ["%I64d", "%08<PRIx64>"]),  # Windows; gettext's <inttypes.h> form
        ("set Address to %#<PRIx64>", ["%#<PRIx64>"]),  # binutils: <PRIx64> was an HTML tag, "%#" reached the model
        ("%1$s: order for `%2$s' already defined at %3$s:%Zu", ["%1$s", "%2$s", "%3$s", "%Zu"]),  # glibc
        ("file open error: %m", ["%m"]),
        ("%1$*2$d items", ["%1$*2$d"]),
        ("Last login: %a %b %e %H:%M:%S %Z %Y", ["%a", "%b", "%e", "%H", "%M", "%S", "%Z", "%Y"]),  # strftime
        ("%X%P: address 0x%v of %B section", ["%X", "%P", "%v", "%B"]),  # GNU ld's own directives (ld.mo)
    ],
)
def test_platform_placeholders_in_a_catalogue_never_reach_the_model(message: str, codes: list[str]) -> None:
    catalogue = f'msgid "{message}"\nmsgstr ""\n'
    sent, out = _translated(catalogue, "po", "de")
    assert "%" not in sent[0]
    segment = split_document(catalogue, "po", 200).segments[0]
    assert [opening for opening, _ in segment.codes] == codes
    assert all(code in out.split("msgstr", 1)[1] for code in codes)


def test_xliff_placeholders_are_tags_as_in_a_catalogue() -> None:
    # The reproducer of "%1$s came back altered": XLIFF sent its placeholders to the model as text.
    xliff = (
        '<xliff version="1.2"><file source-language="en" target-language="de"><body>'
        '<trans-unit id="1"><source>%1$s on %2$s</source></trans-unit></body></file></xliff>'
    )
    sent, out = _translated(xliff, "xliff", "de")
    assert sent == ["<x1/> on <x2/>"]
    assert '<target state="translated">%1$s ON %2$s</target>' in out


def test_xliff_20_gets_trglang_once_translated() -> None:
    xliff = (
        '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">\n'
        '<file id="f"><unit id="u"><segment><source>Save now.</source></segment></unit></file>\n</xliff>\n'
    )
    _, out = _translated(xliff, "xliff", "de")
    assert out.startswith(
        '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="de">'
    )
    assert ElementTree.fromstring(out.encode()).get("trgLang") == "de"
    assert out.count("trgLang") == 1


def test_xliff_12_gets_target_language_on_each_file() -> None:
    unit = '<body><trans-unit id="1"><source>Save now.</source></trans-unit></body>'
    files = f'<file original="a" source-language="en">{unit}</file><file original="b">{unit}</file>'
    xliff = f'<xliff version="1.2">{files}</xliff>'
    _, out = _translated(xliff, "xliff", "pt-BR")
    translated = ElementTree.fromstring(out.encode()).findall("file")
    assert [f.get("target-language") for f in translated] == ["pt-BR", "pt-BR"]


def test_xliff_preserved_whitespace_stays_exactly() -> None:
    xliff = (
        '<xliff version="1.2"><file source-language="en" target-language="fr"><body>\n'
        '<trans-unit id="1" xml:space="preserve"><source>Line one.\n</source></trans-unit>\n'
        '<trans-unit id="2"><source xml:space="preserve"> Two\nlines\t here</source><target/></trans-unit>\n'
        '<trans-unit id="3"><source>Normal\n   text</source></trans-unit>\n'
        "</body></file></xliff>"
    )
    sent, out = _translated(xliff, "xliff", "fr")
    assert sent == ["Line one.", "Two<x1/>lines<x2/>here", "Normal text"]
    assert '<target state="translated">LINE ONE.\n</target>' in out  # was "LINE ONE. "
    assert '<target state="translated"> TWO\nLINES\t HERE</target>' in out
    assert '<target state="translated">NORMAL TEXT</target>' in out  # whitespace normalised where not preserved


def test_json_values_get_a_catalogues_inline_treatment() -> None:
    source = json.dumps(
        {
            "moved": "Moved %1$s to %2$s.",
            "link": 'Read <a href="https://example.com/guide">the guide</a> first.',
            "email": "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$",
            "digits": "\\d{3}-\\d{4}",
            "space": "\u00a0",
            "greeting": "Hello {name}, you have %d new messages.",
        },
        indent=2,
    )
    sent, out = _translated(source, "json", "fr")
    assert sent == [
        "Moved <x1/> to <x2/>.",
        "Read <x1>the guide</x1> first.",
        "Hello <x1/>, you have <x2/> new messages.",
    ]
    assert json.loads(out) == {
        "moved": "MOVED %1$s TO %2$s.",
        "link": 'READ <a href="https://example.com/guide">THE GUIDE</a> FIRST.',
        "email": "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$",  # a regular expression: never sent
        "digits": "\\d{3}-\\d{4}",
        "space": "\u00a0",  # no words: kept, never an error
        "greeting": "HELLO {name}, YOU HAVE %d NEW MESSAGES.",
    }


def test_json_identifiers_and_codes_never_reach_the_model() -> None:
    # iso-codes' iso_3166-1.json through the real model: "alpha_2": "AW" came back "A", next to its name.
    source = json.dumps(
        {
            "alpha_2": "AW",
            "alpha_3": "ABW",
            "name": "Aruba",
            "method": "PUT",
            "auth": "aws.auth#sigv4",
            "uri": "/archive-rule/{name}",
            "field": "firstName",
            "subdivision": "US-CA",
            "label": "Log in",
            "title": "Save",
        }
    )
    sent, out = _translated(source, "json", "fr")
    assert sent == ["Aruba", "Log in", "Save"]
    assert json.loads(out)["alpha_2"] == "AW" and json.loads(out)["name"] == "ARUBA"
