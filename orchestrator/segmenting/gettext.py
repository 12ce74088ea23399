"""gettext catalogues (``.po``/``.pot``): each untranslated ``msgid`` fills its ``msgstr``.

An entry whose ``msgstr`` is empty (``msgstr ""`` on one line) is translated; an entry that
already has a translation is left as it is, as are comments, flags, references, ``msgctxt`` and
obsolete entries (``#~``). A plural entry sends its ``msgid`` and ``msgid_plural`` once each and
gets as many ``msgstr[N]`` as the target language has plural forms (:class:`PluralForms`,
:mod:`contract.plural_rules`). Once translated, the header names the target: ``Language:`` and
``Plural-Forms:`` (added where missing; a catalogue without a header gets one), a template's
``charset=CHARSET`` becomes ``UTF-8`` and its ``#, fuzzy`` goes, so ``msgfmt -c`` accepts the
result. Placeholders and strftime directives (:mod:`orchestrator.segmenting.message_codes`)
are unit tags the model never sees; inline HTML tags in a message are paired tags; line breaks
that open or close a message frame its translation. A line that is none of a comment, a keyword
with its quoted string, a continuation string or a blank is a clear error with its number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from contract.errors import InvalidJobError
from contract.placeholders import placeholders
from contract.po_strings import CONTINUATION, ESCAPES, KEYWORD, PoStringError, quote, unquote
from orchestrator.segmenting.inline_block import segment_of
from orchestrator.segmenting.message_codes import message_tokens
from orchestrator.segmenting.parts import LangAttribute, LangValue, PluralForms, Segment, SingularFit, attached_place
from orchestrator.segmenting.skeleton import Skeleton

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
# In the header's text (its strings decoded and joined): a field the target language sets, and a
# template's placeholder charset. A field's value may span strings (msgcat wraps a long Plural-Forms).
_HEADER_FIELD = re.compile(r"^(Language|Plural-Forms):[ \t]*([^\n]*)", re.MULTILINE)
_TEMPLATE_CHARSET = re.compile(r"^Content-Type:[^\n]*charset=(CHARSET)\b", re.MULTILINE)
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FIELD_VALUES: dict[str, LangValue] = {"Language": "gettext", "Plural-Forms": "plural-forms"}


def split_po(
    source: str, max_chars: int, skeleton: Skeleton, *, retranslate: bool = False, target_lang: str | None = None
) -> None:
    """A gettext catalogue: the empty ``msgstr`` of each untranslated entry becomes a segment.

    With ``retranslate``, a ``msgstr`` that has a translation (on one line or several) is replaced too.
    ``target_lang``: a catalogue whose header names another language and that has translations is
    refused unless ``retranslate`` (its translations would stay in that language under the target's
    name, and its plural entries keep that language's number of forms, which ``msgfmt -c`` rejects).
    """
    lines = [m.group(0) for m in _LINE.finditer(source) if m.group(0)]
    header_flags, has_header = _header_flags(lines)
    catalogue = _catalogue_rule(lines) if has_header else ("", "")
    if target_lang is not None and not retranslate:
        _check_language(lines, catalogue[0], target_lang)
    if not has_header and lines:
        _new_header(skeleton, lines[0][len(lines[0].rstrip("\r\n")) :] or "\n")
    entry = _Entry()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1  # 1-based: the line being read
        body = line.rstrip("\r\n")
        stripped = body.strip()
        if not stripped or stripped.startswith("#"):
            entry = _Entry() if not stripped else entry
            if number - 1 == header_flags and "{}" not in line:  # a translated template's header is no longer fuzzy
                skeleton.add_lang(LangAttribute(line, template=_without_fuzzy(line)))
            else:
                skeleton.literal(line)
            continue
        keyword = KEYWORD.match(stripped)
        if keyword is not None:
            name, index, quoted = keyword.group(1), keyword.group(2), keyword.group(3)
            if name in ("msgctxt", "msgid") and entry.seen_msgstr:
                entry = _Entry()  # a new entry without a blank line before it
            entry.current = name
            if name.startswith("msgstr"):
                entry.seen_msgstr = True
                if index is not None and "msgid_plural" in entry.values:
                    number = _plural_entry(skeleton, lines, number - 1, entry, retranslate, catalogue)
                    continue
                if index is None and entry.is_header():
                    number = _header(skeleton, lines, number - 1, catalogue)
                    continue
                plural_index = int(index) if index is not None else 0
                continued = _continuation_lines(lines, number)
                empty = quoted == '""' and not continued
                if (empty or retranslate) and entry.has_message(plural_index):
                    start = line.index('"', len(line) - len(line.lstrip()) + len(name))
                    _msgstr(skeleton, lines, number - 1, start, continued, entry.text_for(plural_index))
                    number += continued
                    continue
            else:
                entry.values[name] = [_unquote(quoted, number)]
            skeleton.literal(line)
            continue
        continuation = CONTINUATION.match(body)
        if continuation is None or entry.current is None:
            raise InvalidJobError(
                f"this is not a gettext catalogue: line {number} is not a comment, a keyword with a quoted "
                f"string (msgid, msgstr, ...) or a quoted continuation: {body[:60]!r}"
            )
        if not entry.current.startswith("msgstr"):
            entry.values.setdefault(entry.current, []).append(_unquote(continuation.group(1), number))
        skeleton.literal(line)


def _check_language(lines: list[str], language: str, target_lang: str) -> None:
    """Refuse a catalogue in another language than ``target_lang`` (header ``Language:``) that has translations."""
    if not language.strip() or _base(language) == _base(target_lang) or not _has_translations(lines):
        return
    raise InvalidJobError(
        f"this catalogue is already in {language.strip()} (its header says Language: {language.strip()}) and has "
        f"translations, which would stay in {language.strip()} in a catalogue for {target_lang}; translate it to "
        f"{language.strip()}, or send it with --retranslate (retranslate=true over HTTP) to translate every entry"
    )


def _base(language: str) -> str:
    """A language tag's base language, as gettext or BCP 47 writes it: ``pt_BR``, ``pt-BR`` -> ``pt``."""
    return re.split(r"[_@.-]", language.strip(), maxsplit=1)[0].lower()


def _has_translations(lines: list[str]) -> bool:
    """Whether an entry other than the header has a ``msgstr`` with text (obsolete ``#~`` entries are comments)."""
    header_skipped = False
    for number, line in enumerate(lines):
        keyword = KEYWORD.match(line.strip())
        if keyword is None or not keyword.group(1).startswith("msgstr"):
            continue
        if not header_skipped:  # the first msgstr is the header's (the caller has one)
            header_skipped = True
            continue
        if keyword.group(3) != '""' or _continuation_lines(lines, number + 1):
            return True
    return False


def _header_flags(lines: list[str]) -> tuple[int, bool]:
    """Whether the catalogue opens with a header entry, and the index of its flags line if that says ``fuzzy``.

    (-1 when there is none: a template's header says ``fuzzy``, a translation's does not.)
    """
    flags = -1
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#,") and "fuzzy" in stripped:
            flags = index
        elif stripped and not stripped.startswith("#"):
            following = lines[index + 1].lstrip() if index + 1 < len(lines) else ""
            header = stripped == 'msgid ""' and following.startswith("msgstr")
            return (flags if header else -1), header
    return -1, False


def _catalogue_rule(lines: list[str]) -> tuple[str, str]:
    """The header's own ``Language:`` and ``Plural-Forms:`` values (empty where missing)."""
    start = next(index for index, line in enumerate(lines) if line.strip() == 'msgid ""')
    end = start + 2 + _continuation_lines(lines, start + 2)
    found = {"Language": "", "Plural-Forms": ""}
    for header_field in _header_fields("".join(lines[start + 1 : end])):
        if header_field.name in found:
            found[header_field.name] = header_field.value
    return found["Language"], found["Plural-Forms"]


@dataclass(frozen=True, slots=True)
class _HeaderField:
    """A header field's value the translation rewrites: its name (``charset`` for a template's
    ``charset=CHARSET``), where its source is in the header's lines, its decoded text."""

    name: str
    start: int
    end: int
    value: str


def _header_fields(block: str) -> list[_HeaderField]:
    """The ``Language:``, ``Plural-Forms:`` and template charset values of the header's ``msgstr`` lines ``block``.

    Read as gettext reads a header, from its strings decoded and joined, so a value split over two
    strings (as msgcat wraps ``Plural-Forms:``) or a header in one string is found whole; each
    value's place is given in ``block``, in document order.
    """
    chars: list[str] = []
    places: list[tuple[int, int]] = []  # each decoded character's source in block
    closing = len(block)  # where a value that runs to the header's end stops: its last closing quote
    for string in _STRING.finditer(block):
        index, end = string.start(1), string.end(1)
        while index < end:
            width = 2 if block[index] == "\\" else 1
            chars.append(ESCAPES.get(block[index + 1], block[index + 1]) if width == 2 else block[index])
            places.append((index, index + width))
            index += width
        closing = end
    text = "".join(chars)

    def start_of(position: int) -> int:
        return places[position][0] if position < len(places) else closing

    found = [
        _HeaderField(
            match.group(1),
            start_of(match.start(2)),
            places[match.end(2) - 1][1] if match.group(2) else start_of(match.start(2)),
            match.group(2),
        )
        for match in _HEADER_FIELD.finditer(text)
    ]
    found += [
        _HeaderField("charset", start_of(match.start(1)), places[match.end(1) - 1][1], match.group(1))
        for match in _TEMPLATE_CHARSET.finditer(text)
    ]
    return sorted(found, key=lambda header_field: header_field.start)


def _new_header(skeleton: Skeleton, newline: str) -> None:
    """A header for a catalogue without one, written once it is translated (``msgfmt`` refuses a catalogue without)."""
    fields = [
        '"MIME-Version: 1.0\\n"',
        '"Content-Type: text/plain; charset=UTF-8\\n"',
        '"Content-Transfer-Encoding: 8bit\\n"',
    ]
    opening = newline.join(['msgid ""', 'msgstr ""', '"Language: {}\\n"', ""])
    skeleton.add_lang(LangAttribute("", "gettext", opening))
    closing = newline.join([*fields, '"Plural-Forms: {}\\n"', "", ""])
    skeleton.add_lang(LangAttribute("", "plural-forms", closing))


def _without_fuzzy(flags_line: str) -> str:
    """A ``#,`` flags line without ``fuzzy`` (nothing at all if that was its only flag)."""
    body = flags_line.rstrip("\r\n")
    kept = [flag.strip() for flag in body.strip()[2:].split(",") if flag.strip() and flag.strip() != "fuzzy"]
    return f"#, {', '.join(kept)}{flags_line[len(body) :]}" if kept else ""


def _continuation_lines(lines: list[str], after: int) -> int:
    """How many quoted continuation lines follow line number ``after`` (1-based)."""
    count = 0
    while after + count < len(lines) and CONTINUATION.match(lines[after + count].rstrip("\r\n")):
        count += 1
    return count


@dataclass(slots=True)
class _Entry:
    """What has been read of the entry being walked."""

    values: dict[str, list[str]] = field(default_factory=dict)
    current: str | None = None
    seen_msgstr: bool = False

    def text_for(self, plural_index: int) -> str:
        """The source text of ``msgstr[plural_index]``: the plural form for every index past 0."""
        key = "msgid_plural" if plural_index > 0 and "msgid_plural" in self.values else "msgid"
        return "".join(self.values.get(key, []))

    def is_header(self) -> bool:
        """Whether this is the catalogue's header entry: ``msgid ""`` without a context."""
        return "msgctxt" not in self.values and not "".join(self.values.get("msgid", ["x"]))

    def has_message(self, plural_index: int) -> bool:
        """Whether ``msgstr[plural_index]`` has a message to translate (the header has none)."""
        if not "".join(self.values.get("msgid", [])).strip():
            return False
        return bool(self.text_for(plural_index).strip())


def _plural_entry(
    skeleton: Skeleton, lines: list[str], first: int, entry: _Entry, retranslate: bool, catalogue: tuple[str, str]
) -> int:
    """A plural entry's ``msgstr[N]`` lines (from line index ``first``); returns the index of the line after them.

    Untranslated (every form empty) or with ``retranslate``, the singular and the plural are one
    segment each and the lines become :class:`PluralForms`: one ``msgstr[N]`` per form of the
    target language. Otherwise, or with nothing to translate, the lines stay as they are.
    """
    last = first
    empty = True
    while last < len(lines):
        keyword = KEYWORD.match(lines[last].strip())
        if keyword is None or keyword.group(2) is None:
            break
        continued = _continuation_lines(lines, last + 1)
        empty = empty and keyword.group(3) == '""' and not continued
        last += 1 + continued
    block = "".join(lines[first:last])
    body = block.rstrip("\r\n")
    singular, plural = entry.text_for(0), entry.text_for(1)
    if not (empty or retranslate) or not singular.strip():
        skeleton.literal(block)
        return last
    forms: list[str] = []
    segments: list[int] = []
    for text in (singular, plural):
        segment = _message_segment(text, '""')
        index = None if segment is None else skeleton.add_detached(segment)
        if index is None:  # nothing to translate in this form: it stays as the source says
            forms.append(quote(text))
        else:
            segments.append(index)
            forms.append(attached_place(index))
    if not segments:
        skeleton.literal(block)
        return last
    first_line = lines[first]
    newline = first_line[len(first_line.rstrip("\r\n")) :] or "\n"
    singular_has, plural_has = placeholders(singular), placeholders(plural)
    fit: SingularFit = "same" if singular_has and singular_has == plural_has else "other"
    if fit == "other" and not singular_has - plural_has:
        fit = "fewer"
    prefix = first_line[: len(first_line) - len(first_line.lstrip(" \t"))]
    skeleton.add_lang(PluralForms(body, (forms[0], forms[1]), tuple(segments), fit, prefix, newline, catalogue))
    skeleton.literal(block[len(body) :])
    return last


def _header(skeleton: Skeleton, lines: list[str], first: int, catalogue: tuple[str, str]) -> int:
    """The header's ``msgstr`` (from line index ``first``): ``Language:`` and ``Plural-Forms:`` name the target.

    A field the header lacks is added after its last line once the catalogue is translated; a
    template's ``charset=CHARSET`` becomes ``charset=UTF-8`` (what the translation is written in).
    A value wrapped over several strings is replaced whole (by one string's worth of text).
    Returns the index of the line after the header's strings.
    """
    last = first + 1 + _continuation_lines(lines, first + 1)
    block = "".join(lines[first:last])
    position = 0
    seen: set[str] = set()
    for header_field in _header_fields(block):
        skeleton.literal(block[position : header_field.start])
        raw = block[header_field.start : header_field.end]
        if header_field.name == "charset":  # a template's placeholder charset: the translation is in UTF-8
            skeleton.add_lang(LangAttribute(raw, template="UTF-8"))
        else:
            seen.add(header_field.name)
            skeleton.add_lang(LangAttribute(raw, _FIELD_VALUES[header_field.name], catalogue=catalogue))
        position = header_field.end
    skeleton.literal(block[position:])
    ending = lines[last - 1][len(lines[last - 1].rstrip("\r\n")) :]
    closing = lines[last - 1].rstrip("\r\n").rstrip(" \t")
    unfinished = not closing.endswith(('\\n"', ' ""')) and closing != '""'  # the last field lacks its \n
    for name, value in _FIELD_VALUES.items():
        if name not in seen:
            opening = "\\n" if unfinished else ""
            line = f'"{opening}{name}: {{}}\\n"'
            unfinished = False
            template = f"{line}{ending}" if ending else f"\n{line}"
            skeleton.add_lang(LangAttribute("", value, template, catalogue))
    return last


def _msgstr(skeleton: Skeleton, lines: list[str], first: int, start: int, continued: int, text: str) -> None:
    """The segment for one ``msgstr``: its string(s), from the quote at ``start`` of line ``first``, replaced.

    The model reads the message with its placeholders as tags; the translation is written back as
    one quoted string. A message of placeholders only has nothing to translate and stays.
    """
    last = first + continued
    end_line = lines[last]
    end = end_line.rstrip("\r\n").rstrip(" \t")
    skeleton.literal(lines[first][:start])
    if continued:
        raw = "".join([lines[first][start:], *lines[first + 1 : last], end])
    else:
        raw = lines[first][start : len(end)]
    segment = _message_segment(text, raw)
    if segment is None:
        skeleton.literal(raw)
    else:
        skeleton.add_segment(segment)
    skeleton.literal(end_line[len(end) :])


def _message_segment(text: str, raw: str) -> Segment | None:
    """The segment that writes the translation of message ``text`` as a PO string where the source has ``raw``.

    Whitespace that opens or closes the message stays out of the model's hands and frames the
    translation: ``msgfmt -c`` requires a ``msgstr`` to begin and end with ``\\n`` as its ``msgid`` does,
    and a program that joins ``" (backup: %s)"`` to another string needs its space. ``None``: a
    message without words.
    """
    core = text.strip()
    leading = text[: len(text) - len(text.lstrip())]
    trailing = text[len(leading) + len(core) :]
    return segment_of(
        message_tokens(core, html_only=True), "po", raw=raw, frame=(quote(leading)[:-1], quote(trailing)[1:])
    )


def _unquote(quoted: str, number: int) -> str:
    """The text of a PO string literal, an unknown escape an error naming the line."""
    try:
        return unquote(quoted)
    except PoStringError as exc:
        raise InvalidJobError(f"line {number}: {exc}") from None
