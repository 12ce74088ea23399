"""The parts a document is cut into: literal text, segments with their inline codes, ``lang`` values."""

from __future__ import annotations

import html
import json
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from contract import inline_tags, plural_rules

Escape = Literal["", "html", "attr", "po", "json"]
"""How a translation is written back: as it is, as HTML (or XML) text or attribute value, escaped
for inside a gettext or a JSON string."""
_PRIVATE_USE_START = 0xE000
_STAND_INS = 6_000  # private-use characters that stand for tags while a translation is wrapped
_PRIVATE_USE = re.compile(f"[{chr(_PRIVATE_USE_START)}-{chr(_PRIVATE_USE_START + _STAND_INS)}]")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 text cannot hold (a model may write one): left out of HTML and XML translations."""
_PO_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"})


class Wrap(NamedTuple):
    """How a translation is wrapped into lines like its source (hard-wrapped text, a subtitle cue)."""

    width: int
    first_indent: int  # the first line's indentation (written before the segment, as a literal)
    indent: str  # the continuation lines' indentation
    newline: str
    always: bool = False  # also a one-line source (a cue: the translation keeps to its width)


CodeKind = Literal["open", "close", "unit", "break", "space", "join"]

ATTACHED_MARK = "\ufdd0"
"""A Unicode noncharacter: marks where a code's raw holds a detached segment (PostgreSQL stores it; NUL it cannot)."""
_ATTACHED = re.compile("\ufdd0([0-9]+)\ufdd1")


def attached_place(index: int) -> str:
    """The mark a code's raw holds where detached segment ``index`` goes."""
    return f"\ufdd0{index}\ufdd1"


@dataclass(frozen=True, slots=True)
class Code:
    """Inline markup inside a block of prose, kept out of the model's hands.

    ``open``/``close``: an element whose content is translated (a link, bold text), paired by
    ``name`` into ``<xN>…</xN>``; ``unit``: something the model never sees (a code span, a URL, an
    image, a ``translate="no"`` span) as ``<xN/>``; ``break``: a unit that also ends a line (``<br>``),
    so a sentence may end at it; ``space``: a soft line break (with the prefix of the next line)
    that the model sees as one space and a translation replaces; ``join``: markup the model never
    sees and a translation drops (a Word run boundary with the same formatting on both sides).

    A raw may hold ``U+FDD0 N U+FDD1``: the place of detached segment ``N`` (an ``alt`` attribute of an
    image inside the sentence), filled in when the document is assembled.

    ``worded``: a unit that is a word of its sentence (a code span, a URL, a placeholder): at the
    block's start or end it stays inside the segment as a tag, where other units (an image, a
    comment, a Word bookmark) stay outside as framing.
    """

    raw: str
    kind: CodeKind
    name: str = ""
    worded: bool = False


@dataclass(frozen=True, slots=True)
class Segment:
    """A part of prose to translate: ``text`` goes to the model, ``raw`` is how the source spelled it.

    ``codes`` hold the markup behind the placeholder tags of ``text``: for tag ``xN``,
    ``codes[N-1]`` is ``(opening raw, closing raw)`` (a unit tag's closing raw is empty).
    """

    text: str
    raw: str
    escape: Escape = ""
    codes: tuple[tuple[str, str], ...] = ()
    detached: bool = False  # rendered inside another segment's markup, not where it was added
    wrap: Wrap | None = None
    frame: tuple[str, str] = ("", "")
    """Written around a translation, not around the raw: a gettext string's quotes, an XLIFF ``<target>``."""

    def render(self, translation: str | None, attached: Sequence[str | None] = ()) -> str:
        """The segment in the output: the source if untranslated (or unchanged), else the translation.

        ``attached``: the rendered detached segments by index, for the markup that holds them.

        A translation whose placeholder tags do not match the source's keeps the source (the
        worker checks the tags before a translation is stored, so only a bug gets here; the
        document's report lists it: :meth:`tags_kept`).
        """
        unchanged = translation == self.text and self.frame == ("", "")  # a framed target is written even so
        if translation is None or unchanged or not self.tags_kept(translation):
            out = [self.raw]
        elif not self.codes:
            out = [self._escaped(self._wrapped(translation))]
        else:
            out = self._restored(self._wrapped(translation))  # wrapped with tags: no break inside markup
        if out != [self.raw] and self.frame != ("", ""):
            out = [self.frame[0], *out, self.frame[1]]
        return fill_attached("".join(out), attached)

    def _wrapped(self, text: str) -> str:
        """``text`` wrapped as the source paragraph was (at its width, with its indentation)."""
        if self.wrap is None:
            return text
        width, first_indent, indent, newline, _ = self.wrap
        tags = [match.group(0) for match in inline_tags.TAG.finditer(text)]
        stand_ins = bool(tags) and len(tags) <= _STAND_INS and not _PRIVATE_USE.search(text)
        if stand_ins:  # each tag counts as one character and is never broken
            numbered = iter(range(len(tags)))
            text = inline_tags.TAG.sub(lambda _: chr(_PRIVATE_USE_START + next(numbered)), text)
        lines = textwrap.wrap(
            " " * first_indent + text,
            width=max(width, 20),
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        wrapped = newline.join(lines)[first_indent:] if lines else text
        if stand_ins:
            wrapped = _PRIVATE_USE.sub(lambda m: tags[ord(m.group(0)) - _PRIVATE_USE_START], wrapped)
        return wrapped

    def _restored(self, translation: str) -> list[str]:
        out: list[str] = []
        for token in inline_tags.tokens(translation):
            if isinstance(token, str):
                out.append(self._escaped(token))
            else:
                opening, closing = self.codes[token.number - 1]
                code = closing if token.kind == "close" else opening
                # a PO message's codes are its decoded text (``<a href="…">``): escaped as its words are
                out.append(self._escaped(code) if self.escape == "po" else code)
        return out

    def tags_kept(self, translation: str) -> bool:
        """Whether ``translation`` keeps this segment's placeholder tags (always, for a segment without).

        In markup (``escape="html"``) a unit tag may stand for one edge of an element that crosses a
        sentence end (``</i>`` of an ``<i>`` opened in the sentence before): the translation must keep
        those edges in their order and outside its paired tags, or the document (an EPUB's XHTML)
        would no longer nest.
        """
        if not self.codes:
            return True
        if inline_tags.tag_problem(self.text, translation) is not None:
            return False
        if self.escape != "html":
            return True
        edges = open_edges(self.raw)
        return edges is None or open_edges("".join(self._restored(translation))) == edges

    def _escaped(self, text: str) -> str:
        if self.escape == "html":
            return html.escape(_NOT_XML.sub("", text), quote=False)
        if self.escape == "attr":
            return html.escape(_NOT_XML.sub("", text), quote=True)
        if self.escape == "po":
            return text.translate(_PO_ESCAPES)
        if self.escape == "json":
            return json.dumps(text, ensure_ascii=False)[1:-1]
        return text


LangValue = Literal["tag", "gettext", "plural-forms"]
"""What a :class:`LangAttribute` writes for the target: its BCP-47 tag (XML-escaped), its gettext
``Language:`` form (``pt_BR``), or its gettext ``Plural-Forms:`` value."""


@dataclass(frozen=True, slots=True)
class LangAttribute:
    """Text that names the target language once translated, as written until then.

    An HTML ``lang`` or XLIFF ``trgLang`` value, a gettext header's ``Language:`` or
    ``Plural-Forms:`` value; with ``template``, text that is absent from the source and added
    once translated (``{}`` is where the value goes: `` trgLang="{}"``).
    """

    raw: str
    value: LangValue = "tag"
    template: str = "{}"
    catalogue: tuple[str, str] = ("", "")
    """A gettext catalogue's own ``Language:`` and ``Plural-Forms:`` values (its rule stands for its own language)."""

    def render(self, target_lang: str | None) -> str:
        """The value for ``target_lang`` in ``template`` if the document was translated, else the source's text."""
        if target_lang is None:
            return self.raw
        if self.value == "gettext":
            text = plural_rules.gettext_language(target_lang)
        elif self.value == "plural-forms":
            text = plural_rules.plural_rule(target_lang, *self.catalogue).header
        else:
            text = html.escape(target_lang, quote=True)
        return self.template.replace("{}", text)


SingularFit = Literal["same", "fewer", "other"]
"""How a plural entry's singular's placeholders compare with its plural's: the same, some of them, others."""


@dataclass(frozen=True, slots=True)
class PluralForms:
    """A gettext plural entry's ``msgstr[N]`` lines: as many as the target language has forms.

    ``forms``: the singular's and the plural's translation as PO string literals, each the mark
    of a detached segment (:func:`attached_place`) or, for a message without words (``"%d"``),
    the source string itself. The form ``n == 1`` takes gets the singular when it serves no other
    number and the singular has no placeholder the plural lacks (``singular`` is ``"fewer"``), or
    when the singular carries exactly the plural's placeholders (``"same"``: ``%d file``); every
    other form gets the plural (its placeholders are what ``msgfmt -c`` checks each form against).
    """

    raw: str  # the lines as written, without the last one's line break
    forms: tuple[str, str]
    segments: tuple[int, ...]
    singular: SingularFit
    prefix: str = ""
    newline: str = "\n"
    catalogue: tuple[str, str] = ("", "")
    """The catalogue's own ``Language:`` and ``Plural-Forms:`` (see :func:`contract.plural_rules.plural_rule`)."""

    def render(
        self, target_lang: str | None, translations: Sequence[str | None], attached: Sequence[str | None]
    ) -> str:
        """The source's lines while no segment of the entry is translated, else one line per target form."""
        if target_lang is None or all(translations[index] is None for index in self.segments):
            return self.raw
        rule = plural_rules.plural_rule(target_lang, *self.catalogue)
        singular, plural = (fill_attached(form, attached) for form in self.forms)
        if '""' in (singular, plural):  # one of the two kept its source: msgfmt -c refuses a half-translated entry
            singular = plural = '""'
        use_singular = (self.singular == "same" and rule.count > 1) or (self.singular != "other" and rule.only_one)
        lines = [
            f"{self.prefix}msgstr[{n}] {singular if n == rule.one and use_singular else plural}"
            for n in range(rule.count)
        ]
        return self.newline.join(lines)


@dataclass(frozen=True, slots=True)
class Marked:
    """Source text that changes when segment ``segment`` is translated (an XLIFF ``state``)."""

    raw: str
    translated: str
    segment: int

    def render(self, translations: Sequence[str | None]) -> str:
        """``translated`` once the segment has a translation of its own, else ``raw``."""
        translation = translations[self.segment]
        return self.raw if translation is None else self.translated


Part = str | Segment | LangAttribute | Marked | PluralForms


_MARKUP_TAG = re.compile(r"""<(/?)([A-Za-z][^\s/>]*)(?:[^>"']|"[^"]*"|'[^']*')*?(/?)>""")
_VOID_ELEMENTS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


def open_edges(markup: str) -> list[str] | None:
    """The element edges ``markup`` leaves unmatched, in order (``"/i"`` a close, ``"b"`` an open).

    ``None`` when an end tag meets another element left open inside it (the markup misnests).
    Empty (``<a/>``) and HTML void elements have no edges.
    """
    opened: list[str] = []
    edges: list[str] = []
    for tag in _MARKUP_TAG.finditer(markup):
        name = tag.group(2).lower()
        if tag.group(3) or name in _VOID_ELEMENTS:
            continue
        if not tag.group(1):
            opened.append(name)
        elif not opened:
            edges.append("/" + name)
        elif opened.pop() != name:
            return None
    return edges + opened


def fill_attached(text: str, attached: Sequence[str | None]) -> str:
    """``text`` with the place of each detached segment (``U+FDD0 N U+FDD1``) filled with its rendering."""
    if ATTACHED_MARK not in text:
        return text
    return _ATTACHED.sub(lambda m: attached[int(m.group(1))] or "", text)


def tokens_between(text: str, pattern: re.Pattern[str], code_of: Callable[[re.Match[str]], Code]) -> list[str | Code]:
    """``text`` as the runs between the matches of ``pattern`` and a code for each match, in order."""
    out: list[str | Code] = []
    position = 0
    for match in pattern.finditer(text):
        if match.start() > position:
            out.append(text[position : match.start()])
        out.append(code_of(match))
        position = match.end()
    if position < len(text):
        out.append(text[position:])
    return out
