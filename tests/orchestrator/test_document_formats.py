"""Subtitles and gettext catalogues: identity round trips, what the model is sent, and clear errors."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest

from contract.documents import FORMATS, decode_document, encode_document
from contract.errors import InvalidJobError
from contract.inline_tags import Tag, tokens
from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import finish_document
from tests.msgfmt_check import assert_msgfmt_accepts

SRT = (
    "1\r\n00:00:01,000 --> 00:00:04,000\r\nHello there,\r\n<i>how are you</i> today?\r\n\r\n"
    "2\r\n00:00:05,000 --> 00:00:07,500\r\n{\\an8}I am fine, thanks.\r\n"
)
VTT = (
    "WEBVTT - a test\n\nNOTE this is a note\nspanning lines\n\nSTYLE\n::cue { color: red }\n\n"
    "intro\n00:00.000 --> 00:02.000 align:start\n<v Bob>Hi <b>everyone</b>, welcome!</v>\n\n"
    "00:02.500 --> 00:04.000\nKaraoke <00:03.000>style text.\n"
)
PO = r"""# Translations for dragoman.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

#: app.py:10
#, python-format
msgid "Hello %(name)s, you have {count} new <b>messages</b>."
msgstr ""

#, fuzzy
msgid "Already done"
msgstr "Déjà fait"

msgctxt "menu"
msgid ""
"Open the "
"\"file\"\n"
msgstr ""

msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

#~ msgid "Old entry"
#~ msgstr ""

msgid "%s"
msgstr ""
"""


def shout(text: str) -> str:
    """A stand-in translation: the text in capitals, placeholder tags as they were."""
    return "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tokens(text))


def _translate(source: str, fmt: str, extra: str = "") -> tuple[list[str], str]:
    skeleton = split_document(source, fmt, 200)
    assert skeleton.source() == source
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    assert stored.source() == source
    return [s.text for s in stored.segments], stored.assemble([shout(s.text) + extra for s in stored.segments], "fr")


def test_srt_cues_keep_numbers_timings_and_styling() -> None:
    sent, out = _translate(SRT, "srt")
    assert sent == ["Hello there, <x1>how are you</x1> today?", "I am fine, thanks."]
    assert out == (
        "1\r\n00:00:01,000 --> 00:00:04,000\r\nHELLO THERE, <i>HOW ARE YOU</i> TODAY?\r\n\r\n"  # fits 42
        "2\r\n00:00:05,000 --> 00:00:07,500\r\n{\\an8}I AM FINE, THANKS.\r\n"
    )


def test_a_longer_cue_translation_is_wrapped_to_the_cues_line_length() -> None:
    _, out = _translate(SRT, "srt", " and some more words to make it longer")
    cue = out.split("\r\n\r\n")[0].split("\r\n")[2:]
    assert len(cue) == 2 and all(len(line.replace("<i>", "").replace("</i>", "")) <= 42 for line in cue)


def test_vtt_keeps_header_notes_styles_identifiers_and_settings() -> None:
    sent, out = _translate(VTT, "vtt")
    assert sent == ["Hi <x1>everyone</x1>, welcome!", "Karaoke <x1/>style text."]
    assert out == VTT.replace("Hi <b>everyone</b>, welcome!", "HI <b>EVERYONE</b>, WELCOME!").replace(
        "Karaoke <00:03.000>style text.", "KARAOKE <00:03.000>STYLE TEXT."
    )


def test_po_fills_empty_msgstrs_and_leaves_the_rest() -> None:
    sent, out = _translate(PO, "po")
    assert_msgfmt_accepts(out)
    assert sent == [
        "Hello <x1/>, you have <x2/> new <x3>messages</x3>.",
        'Open the "file"',  # its closing line break frames the translation
        "One file",
        "<x1/> files",
    ]
    assert 'msgstr "HELLO %(name)s, YOU HAVE {count} NEW <b>MESSAGES</b>."' in out
    assert 'msgstr "Déjà fait"' in out  # already translated: left alone
    assert 'msgstr "OPEN THE \\"FILE\\"\\n"' in out  # escaped back into a PO string
    # French's form 0 serves 0 and 1: the singular ("One file") would be wrong for 0, so both get the plural
    assert 'msgstr[0] "%d FILES"\nmsgstr[1] "%d FILES"' in out
    assert '#~ msgstr ""' in out and 'msgid "%s"\nmsgstr ""' in out  # obsolete; nothing to translate
    assert 'msgid ""\nmsgstr ""\n"Content-Type' in out  # the header is not a message


JSON = """{
  "app": {
    "title": "Dragoman \\"beta\\"",
    "greeting": "Hello, {name}! Welcome back.",
    "files": "You have {count, plural, =0 {no files} one {# file} other {# files}} in {folder}.",
    "url": "https://example.com/help",
    "count": 3,
    "tags": ["New", "Caf\\u00e9 menu"],
    "nested": {"gender": "{g, select, male {He replied} other {They replied}}"}
  }
}
"""


XLIFF_12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" target-language="de" datatype="plaintext" original="ui.txt">
    <body>
      <trans-unit id="1">
        <source>Click <g id="1">here</g> to continue.<x id="2"/></source>
      </trans-unit>
      <trans-unit id="2">
        <source>Save &amp; close</source>
        <target/>
      </trans-unit>
      <trans-unit id="3">
        <source>Already done</source>
        <target state="final">Schon erledigt</target>
      </trans-unit>
      <trans-unit id="4" translate="no">
        <source>BrandName</source>
      </trans-unit>
      <trans-unit id="5">
        <source>Press <bpt id="1">&lt;b&gt;</bpt>Enter<ept id="1">&lt;/b&gt;</ept> now.</source>
        <target state="new"></target>
      </trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF_20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="de">
  <file id="f1">
    <unit id="u1">
      <segment id="s1" state="initial">
        <source>Hello <pc id="1">world</pc><ph id="2"/>!</source>
      </segment>
      <segment id="s2">
        <source>Good bye.</source>
        <target>Auf Wiedersehen.</target>
      </segment>
    </unit>
  </file>
</xliff>
"""


def test_po_retranslate_replaces_existing_translations_on_one_line_or_several() -> None:
    source = PO + 'msgid "Two lines"\nmsgstr ""\n"Deux "\n"lignes"\n'
    skeleton = split_document(source, "po", 200, retranslate=True)
    assert skeleton.source() == source
    assert [s.text for s in skeleton.segments][1] == "Already done" and skeleton.segments[-1].text == "Two lines"
    out = skeleton.assemble([shout(s.text) for s in skeleton.segments])
    assert '#, fuzzy\nmsgid "Already done"\nmsgstr "ALREADY DONE"\n' in out  # flags and comments stay
    assert out.endswith('msgid "Two lines"\nmsgstr "TWO LINES"\n')
    assert 'msgstr "Déjà fait"' in split_document(source, "po", 200).assemble(
        [shout(s.text) for s in split_document(source, "po", 200).segments]
    )  # without it, kept


def test_xliff_retranslate_replaces_filled_targets() -> None:
    skeleton = split_document(XLIFF_12, "xliff", 200, retranslate=True)
    assert skeleton.source() == XLIFF_12
    assert "Already done" in [s.text for s in skeleton.segments]
    out = skeleton.assemble([shout(s.text) for s in skeleton.segments])
    assert '<target state="translated">ALREADY DONE</target>' in out
    assert "<source>BrandName</source>\n      </trans-unit>" in out  # translate="no" still wins


def test_xliff_12_fills_missing_and_empty_targets_with_inline_codes_and_state() -> None:
    sent, out = _translate(XLIFF_12, "xliff")
    assert sent == ["Click <x1>here</x1> to continue.<x2/>", "Save & close", "Press <x1/>Enter<x2/> now."]
    root = ElementTree.fromstring(out.encode())  # still well-formed
    assert root.tag.endswith("xliff")
    assert '<target state="translated">CLICK <g id="1">HERE</g> TO CONTINUE.<x id="2"/></target>' in out
    assert '<target state="translated">SAVE &amp; CLOSE</target>' in out
    assert '<target state="final">Schon erledigt</target>' in out  # translated already: left alone
    assert '<trans-unit id="4" translate="no">\n        <source>BrandName</source>\n      </trans-unit>' in out
    assert 'ENTER<ept id="1">&lt;/b&gt;</ept> NOW.</target>' in out
    assert 'target-language="fr"' in out


def test_a_target_is_written_even_when_the_translation_equals_the_source() -> None:
    skeleton = split_document(XLIFF_12, "xliff", 200)
    out = skeleton.assemble([s.text for s in skeleton.segments])  # e.g. a brand name, the same in French
    assert '<target state="translated">Save &amp; close</target>' in out
    assert out.count('<target state="translated">') == 3


def test_xliff_20_sets_the_segment_state_and_trglang() -> None:
    sent, out = _translate(XLIFF_20, "xliff")
    assert sent == ["Hello <x1>world</x1><x2/>!"]
    ElementTree.fromstring(out.encode())
    assert '<segment id="s1" state="translated">' in out and 'trgLang="fr"' in out
    assert '<target>HELLO <pc id="1">WORLD</pc><ph id="2"/>!</target>' in out
    assert '<segment id="s2">\n        <source>Good bye.</source>\n        <target>Auf Wiedersehen.</target>' in out


WORD_NS = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
)
DOCX_BODY = (
    '<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Getting started</w:t></w:r></w:p>'
    '<w:p><w:r><w:t xml:space="preserve">Click </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>here</w:t></w:r>'
    '<w:r><w:t xml:space="preserve"> to open the </w:t></w:r><w:proofErr w:type="spellStart"/>'
    "<w:r><w:t>fi</w:t></w:r><w:r><w:t>le.</w:t></w:r></w:p>"
    '<w:p><w:r><w:t xml:space="preserve">See </w:t></w:r><w:hyperlink r:id="rId9"><w:r><w:rPr>'
    '<w:rStyle w:val="Hyperlink"/></w:rPr><w:t>our guide</w:t></w:r></w:hyperlink><w:r>'
    '<w:t xml:space="preserve"> and press</w:t></w:r><w:r><w:tab/><w:t>Enter &amp; go.</w:t></w:r></w:p>'
    "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>A cell</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:p/>"
)


def make_docx(body: str = DOCX_BODY, header: str = "Company confidential") -> bytes:
    """A small Word document: a body, a header, an image; the parts Word needs to open it."""
    declaration = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    members = {
        "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
        'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
        'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"'
        "/></Types>",
        "_rels/.rels": '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
        'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
        '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
        "word/document.xml": f"{declaration}<w:document {WORD_NS}><w:body>{body}<w:sectPr/></w:body></w:document>",
        "word/header1.xml": f"{declaration}<w:hdr {WORD_NS}><w:p><w:r><w:t>{header}</w:t></w:r></w:p></w:hdr>",
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        archive.writestr("word/media/image1.png", b"\x89PNG not really")
    return buffer.getvalue()


def _members(document: str) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(document)))
    return {name: archive.read(name) for name in archive.namelist()}


def test_docx_paragraphs_are_whole_sentences_with_run_formatting_as_tags() -> None:
    source = encode_document("docx", make_docx())
    skeleton = split_document(source, "docx", 200)
    assert [s.text for s in skeleton.segments] == [
        "Getting started",
        "Click <x1/>here<x2/> to open the file.",  # "fi" + "le." (a spell-check split) is one word
        "See <x1>our guide</x1> and press<x2/>Enter & go.",
        "A cell",
        "Company confidential",
    ]
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))
    original = _members(source)
    assert _members(finish_document("docx", stored.source())) == original  # the same members, byte for byte
    translated = _members(finish_document("docx", stored.assemble([shout(s.text) for s in stored.segments], "fr")))
    assert translated.keys() == original.keys() and translated["word/media/image1.png"] == b"\x89PNG not really"
    body = translated["word/document.xml"].decode()
    ElementTree.fromstring(body)
    assert '<w:t xml:space="preserve">CLICK </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>HERE</w:t>' in body
    assert "<w:t>FILE.</w:t>" not in body and " TO OPEN THE FILE.</w:t>" in body  # merged into one run
    assert '<w:hyperlink r:id="rId9"><w:r><w:rPr><w:rStyle w:val="Hyperlink"/></w:rPr><w:t>OUR GUIDE</w:t>' in body
    assert "<w:tab/><w:t>ENTER &amp; GO.</w:t>" in body and "<w:t>A CELL</w:t>" in body
    assert b"COMPANY CONFIDENTIAL" in translated["word/header1.xml"]
    assert decode_document("docx", source) == make_docx()


def test_json_translates_values_and_keeps_keys_icu_syntax_and_urls() -> None:
    sent, out = _translate(JSON, "json")
    assert sent == [
        'Dragoman "beta"',  # decoded for the model
        "Hello, <x1/>! Welcome back.",
        "You have",
        "no files",
        "<x1/> file",  # the plural's count is a word of its branch: it travels inside as a tag
        "<x1/> files",
        "in <x1/>.",
        "New",
        "Café menu",
        "He replied",
        "They replied",
    ]
    assert json.loads(out) == {
        "app": {
            "title": 'DRAGOMAN "BETA"',
            "greeting": "HELLO, {name}! WELCOME BACK.",
            "files": "YOU HAVE {count, plural, =0 {NO FILES} one {# FILE} other {# FILES}} IN {folder}.",
            "url": "https://example.com/help",
            "count": 3,
            "tags": ["NEW", "CAFÉ MENU"],
            "nested": {"gender": "{g, select, male {HE REPLIED} other {THEY REPLIED}}"},
        }
    }


def test_a_zip_without_a_word_document_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("content.xml", "<x/>")
    with pytest.raises(InvalidJobError, match=r"no word/document\.xml"):
        split_document(base64.b64encode(buffer.getvalue()).decode(), "docx", 200)


def test_the_migration_admits_every_format() -> None:
    versions = Path(__file__).resolve().parents[2] / "migrations" / "versions"
    path = versions / "0021_office_formats_and_detected_documents.py"
    spec = importlib.util.spec_from_file_location("migration_0021", path)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    assert tuple(migration.FORMATS) == FORMATS


@pytest.mark.parametrize(
    ("source", "fmt", "message"),
    [
        ("just some text\n", "srt", "not a SubRip"),
        ("1\n00:00:01,000 --> 00:00:02,000\nHi\n", "vtt", "must start with WEBVTT"),
        ("hello world\n", "po", "line 1 is not a comment"),
        ('msgid "a\\q"\nmsgstr ""\n', "po", "unknown escape"),
        ('{"a": "x",}', "json", "not a JSON file: .* line 1, column 11"),
        ("<xliff version='1.2'><file>", "xliff", "not a well-formed XLIFF"),
        ("<html/>", "xliff", "root element is 'html'"),
        ('<!DOCTYPE x [<!ENTITY a "b">]><xliff version="1.2"/>', "xliff", "DOCTYPE"),
        ("not base64 at all!", "docx", "not a .docx file"),
        (base64.b64encode(b"PK but not a zip").decode(), "docx", "not a .docx file"),
    ],
)
def test_a_file_that_is_not_its_format_is_a_clear_error(source: str, fmt: str, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        split_document(source, fmt, 200)
