"""Real documents found on this machine (``bench.corpus``): identity and translated round trips.

None of these documents was written for dragoman. Each is split as a document of its format;
untranslated it must come back byte for byte (a zipped one: every member's bytes), and each
segment must be a job the API accepts. Translated (every segment's text in capitals, its
placeholder tags as they were) it must keep its format's structure: Markdown's blocks, links,
code spans and inline HTML, HTML's tag sequence, a catalogue's messages, each entry's
placeholders, ``msgfmt -c`` and its ``Language``, JSON's keys and shape, subtitle timings, well-formed XML.

A format the segmenter does not know is skipped; the corpus must hold at least 30 documents. A
failure names the file, the invariant and, for the classes issue 36 fixed, the class.
"""

from __future__ import annotations

import base64
import html.parser
import io
import json
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from collections import Counter
from typing import Any

import pytest
from babel.messages.pofile import read_po
from markdown_it import MarkdownIt

from bench.corpus import CorpusDocument, find_corpus
from contract.documents import FORMATS, ZIPPED_FORMATS
from contract.placeholders import placeholders
from contract.schemas import validate_text
from contract.settings import Settings
from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import ZIPPED, finish_document
from orchestrator.segmenting.zip_container import ZipFormat
from tests.msgfmt_check import assert_msgfmt_accepts
from tests.orchestrator.test_segmenting import shout

MINIMUM = 30
TARGET = "fr"
MAX_SEGMENT_CHARS = 1_500  # DRAGOMAN_MAX_SEGMENT_CHARS' default
CORPUS = find_corpus()
PLACEHOLDER_CLASS = "platform placeholders (glibc's %m, strftime's %b %H %M) reached the model as text"
JSON_CLASS = "JSON string values reached the model raw (HTML markup, placeholders)"
HEADER_CLASS = "the gettext header was not adapted to the target language"


def test_the_machine_has_a_corpus_of_at_least_30_documents() -> None:
    """The corpus is what this machine has: too few documents means the test proves too little."""
    by_format = Counter(document.fmt for document in CORPUS)
    assert len(CORPUS) >= MINIMUM, (
        f"only {len(CORPUS)} real documents found on this machine ({dict(by_format)}); the corpus test needs "
        f"at least {MINIMUM} (HTML and Markdown under /usr/share/doc, .mo catalogues and msgunfmt, JSON...)"
    )


def _split(document: CorpusDocument) -> Skeleton:
    if document.fmt not in FORMATS or (document.fmt in ZIPPED_FORMATS and document.fmt not in ZIPPED):
        pytest.skip(f"the segmenter does not split {document.fmt} yet")
    skeleton = split_document(document.source, document.fmt, MAX_SEGMENT_CHARS, retranslate=document.retranslate)
    return Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it


@pytest.mark.parametrize("document", CORPUS, ids=[d.label for d in CORPUS])
def test_untranslated_document_comes_back_byte_for_byte(document: CorpusDocument) -> None:
    """Split and assembled with no translation, a real document is its source again; each segment is a valid job."""
    skeleton = _split(document)
    out = finish_document(document.fmt, skeleton.source())
    if document.fmt in ZIPPED_FORMATS:
        assert _members(out) == _members(document.source), f"{document.label}: a member's bytes changed"
    else:
        assert out == document.source, f"{document.label}: the identity round trip changed the document"
    max_text_chars = Settings().max_text_chars
    for segment in skeleton.segments:  # whitespace-only content is kept, never a segment (fidelity)
        validate_text(segment.text, max_text_chars)


@pytest.mark.parametrize("document", CORPUS, ids=[d.label for d in CORPUS])
def test_translated_document_keeps_its_structure(document: CorpusDocument) -> None:
    """Every segment translated, a real document keeps its format's structure."""
    skeleton = _split(document)
    translated = skeleton.assemble([shout(segment.text) for segment in skeleton.segments], TARGET)
    out = finish_document(document.fmt, translated)  # a zipped format: each translated member must parse as XML
    if document.fmt in ZIPPED:
        _check_members(document.label, ZIPPED[document.fmt], document.source, out)
    elif document.fmt in _CHECKS:
        _CHECKS[document.fmt](document.label, document.source, out)
    else:
        pytest.fail(f"{document.label}: no structural invariant for {document.fmt}; add one to this test")


def _members(source: str) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(source))) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _check_members(label: str, fmt: ZipFormat, source: str, out: str) -> None:
    """A zipped document: the same members, each translated one well-formed XML, every other byte for byte."""
    before, after = _members(source), _members(out)
    assert list(after) == list(before), f"{label}: the members changed"
    for name, data in before.items():
        if fmt.is_text_part(name):
            ElementTree.fromstring(after[name])  # translated: well-formed XML
        else:
            assert after[name] == data, f"{label}: member {name} is not translated, yet its bytes changed"


def _markdown_shape(text: str) -> tuple[dict[str, Any], int]:
    """What a translation must keep of a Markdown document (blocks, links, images, code, inline HTML).

    And how many of its code spans and inline HTML tags the source wrote across a line break (the
    soft-break class).
    """
    parser = MarkdownIt("commonmark").enable("table")
    blocks: list[str] = []
    inline: Counter[str] = Counter()
    code: list[str] = []
    html_tags: list[str] = []
    targets: list[str] = []
    across = 0
    for token in parser.parse(text):
        if token.type == "inline":
            for child in token.children or []:
                inline[child.type] += child.type in ("link_open", "image", "code_inline", "html_inline")
                if child.type in ("link_open", "image"):
                    targets.append(str(child.attrs.get("href", child.attrs.get("src", ""))))
                if child.type == "code_inline":
                    code.append(child.content)  # a line break inside it reads as a space
                    across += child.content not in token.content
                elif child.type == "html_inline":
                    html_tags += _TAG_NAME.findall(child.content)
                    across += "\n" in child.content
        elif token.type != "text":
            blocks.append(f"{token.type}:{token.tag}")
            if token.type in ("fence", "code_block", "html_block"):
                code.append(token.content)
    shape = {"blocks": blocks, "inline": +inline, "code": code, "html tags": html_tags, "link targets": targets}
    return shape, across


def _check_markdown(label: str, source: str, out: str) -> None:
    (before, _), (after, _) = _markdown_shape(source), _markdown_shape(out)
    for invariant in before:
        if before[invariant] != after[invariant]:
            assert after[invariant] == before[invariant], f"{label}: Markdown {invariant} changed"


_TAG_NAME = re.compile(r"</?([a-zA-Z][\w-]*)")


_TRANSLATED_ATTRIBUTES = frozenset({"alt", "title", "placeholder", "aria-label", "content", "lang"})
_CODE_ELEMENTS = frozenset({"script", "style", "pre", "textarea", "code", "kbd", "samp", "var"})


class _TagSequence(html.parser.HTMLParser):
    """An HTML document's tags in order, with every attribute dragoman does not translate, and its code's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.code: list[str] = []
        self._open_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(f"<{tag}{_kept(attrs)}>")
        self._open_code += tag in _CODE_ELEMENTS

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(f"<{tag}{_kept(attrs)}/>")

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(f"</{tag}>")
        self._open_code -= tag in _CODE_ELEMENTS and self._open_code > 0

    def handle_data(self, data: str) -> None:
        if self._open_code:
            self.code.append(data)


def _kept(attrs: list[tuple[str, str | None]]) -> str:
    """The attributes as a string: names and values, a translated attribute's value left out."""
    return "".join(f" {name}" if name in _TRANSLATED_ATTRIBUTES else f" {name}={value!r}" for name, value in attrs)


def _tag_sequence(text: str) -> _TagSequence:
    parser = _TagSequence()
    parser.feed(text)
    parser.close()
    return parser


def _check_html(label: str, source: str, out: str) -> None:
    parsed, translated = _tag_sequence(source), _tag_sequence(out)
    before, after = parsed.tags, translated.tags
    same = [a == b for a, b in zip(before, after, strict=False)]
    at = same.index(False) if False in same else len(same)
    assert after == before, (
        f"{label}: the HTML tag sequence changed at tag {at}: {before[at : at + 3]} -> {after[at : at + 3]}"
    )
    changed = [(a, b) for a, b in zip(parsed.code, translated.code, strict=False) if a != b]
    assert translated.code == parsed.code, f"{label}: the text of code, pre, script or style changed: {changed[:1]}"


_DIRECTIVE = re.compile(r"%[-#0+]*\d*(?:\.\d+)?[A-Za-z]")
"""Any ``%`` directive: printf, glibc's ``%m``, strftime's; wider than the grammar of ``contract.placeholders``."""
_HEADER = re.compile(r'^msgid ""\r?\nmsgstr ""\r?\n(?:".*"\r?\n)*', re.MULTILINE)
_LANGUAGE = re.compile(r'^"Language: ([^"\\]*)\\n"', re.MULTILINE)


def _messages(text: str) -> dict[tuple[str | None, str], tuple[list[str], list[str]]]:
    """A catalogue's messages: (context, msgid) -> (the msgid and its plural, the translations)."""
    out: dict[tuple[str | None, str], tuple[list[str], list[str]]] = {}
    for message in read_po(io.StringIO(_HEADER.sub("", text, count=1))):  # a template's header: no plural rule
        ids = [str(i) for i in message.id] if isinstance(message.id, tuple | list) else [str(message.id)]
        strings = [str(s) for s in message.string] if isinstance(message.string, tuple | list) else [message.string]
        if ids[0]:  # the header aside
            out[(message.context, ids[0])] = (ids, [str(s) for s in strings])
    return out


def _check_po(label: str, source: str, out: str) -> None:
    """Same messages, each translation with its source's placeholders; ``msgfmt -c`` passes; the target's language.

    Every problem is collected first, so that the failure names them all.
    """
    before, after = _messages(source), _messages(out)
    assert list(after) == list(before), f"{label}: the catalogue's msgids changed"
    problems: list[str] = []
    for (context, msgid), (ids, strings) in after.items():
        kept = before[(context, msgid)][1]
        for index, string in enumerate(strings):
            if index < len(kept) and string == kept[index]:
                continue  # as the catalogue had it (a translator's date format may reorder its directives)
            message = ids[min(index, len(ids) - 1)]  # msgstr[0] translates msgid, the others msgid_plural
            if string and placeholders(string) != placeholders(message):
                pytest.fail(f"{label}: the placeholders of {msgid!r} changed: {message!r} -> {string!r}")
            if string and Counter(_DIRECTIVE.findall(string)) != Counter(_DIRECTIVE.findall(message)):
                problems.append(f"{PLACEHOLDER_CLASS}: {label}: {message!r} -> {string!r}")
    assert_msgfmt_accepts(out, f"{label.rsplit('/', 1)[-1]}.po")
    language = _LANGUAGE.search(out)
    written = None if language is None else language.group(1)
    if written is None or re.split(r"[_@.-]", written)[0] != TARGET:
        problems.append(f"{HEADER_CLASS}: {label}: the translated catalogue's Language is {written!r}, not {TARGET}")
    if problems:
        pytest.fail(f"{len(problems)} problems; the first: {problems[0]}")


def _json_shape(value: Any) -> Any:
    """A JSON value with every string blanked: the keys, their order, the types and every non-string value."""
    if isinstance(value, dict):
        return [(key, _json_shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_json_shape(item) for item in value]
    return "" if isinstance(value, str) else value


def _strings(value: Any) -> list[str]:
    """Every string value of a JSON value (keys aside), in document order."""
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return [value] if isinstance(value, str) else []


def _check_json(label: str, source: str, out: str) -> None:
    """The same keys and shape; each string with its placeholders and its HTML tags (attributes and all)."""
    parsed, translated = json.loads(source), json.loads(out)
    assert _json_shape(translated) == _json_shape(parsed), f"{label}: the JSON keys or shape changed"
    changed = [
        (before, after)
        for before, after in zip(_strings(parsed), _strings(translated), strict=True)
        if placeholders(before) != placeholders(after) or _MARKUP.findall(before) != _MARKUP.findall(after)
    ]
    if changed:
        before, after = changed[0]
        pytest.fail(f"{JSON_CLASS}: {label}: {len(changed)} strings, the first: {before[:200]!r} -> {after[:200]!r}")


_MARKUP = re.compile(r"<[^<>]+>")
_TIMING = re.compile(r"^[^\S\r\n]*(\S+[^\S\r\n]+-->[^\S\r\n]+\S+).*$", re.MULTILINE)


def _check_subtitles(label: str, source: str, out: str) -> None:
    before, after = _TIMING.findall(source), _TIMING.findall(out)
    assert before, f"{label}: no cue timing found in the source"
    assert after == before, f"{label}: the cue timings changed"


def _check_xml(label: str, source: str, out: str) -> None:
    try:
        ElementTree.fromstring(out.encode())
    except ElementTree.ParseError as exc:
        pytest.fail(f"{label}: the translated XLIFF is not well-formed XML ({exc})")


_CHECKS = {
    "md": _check_markdown,
    "html": _check_html,
    "po": _check_po,
    "json": _check_json,
    "srt": _check_subtitles,
    "vtt": _check_subtitles,
    "xliff": _check_xml,
}


@pytest.mark.parametrize(
    ("check", "source", "broken"),
    [
        (
            _check_markdown,
            "# Title\n\nSee [the guide](g.md) and `code`.\n",
            "TITLE\n\nSEE [THE GUIDE](g.md) AND `code`.\n",
        ),
        (_check_markdown, "Run `make test` now.\n", "RUN `MAKE TEST` NOW.\n"),
        (_check_markdown, "See [the guide](guide.md).\n", "SEE [THE GUIDE](GUIDE.MD).\n"),
        (_check_html, "<p>Hello <b>you</b></p>", "<p>HELLO you</p>"),
        (_check_html, '<p><a href="a.html" title="A">Hi</a></p>', '<p><a href="A.HTML" title="B">HI</a></p>'),
        (_check_html, "<p>Run <code>ls -l</code></p>", "<p>RUN <code>LS -L</code></p>"),
        (_check_po, 'msgid "%s files"\nmsgstr "%s Dateien"\n', 'msgid "%s files"\nmsgstr "S FILES"\n'),
        (_check_json, '{"a": {"b": "x"}, "n": 1}', '{"a": {"B": "X"}, "n": 1}'),
        (_check_subtitles, "1\n00:00:01,000 --> 00:00:02,000\nHi\n", "1\n00:00:01,000 --> 00:00:02,500\nHI\n"),
        (_check_xml, "<xliff><target>a</target></xliff>", "<xliff><target>A &</target></xliff>"),
    ],
)
def test_each_invariant_catches_a_broken_translation(check: Any, source: str, broken: str) -> None:
    """The structural checks above fail on a translation that broke what they guard (they can fail)."""
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        check("sample", source, broken)
