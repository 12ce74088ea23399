"""gettext catalogues (``.po``/``.pot``): each untranslated ``msgid`` fills its ``msgstr``.

An entry whose ``msgstr`` is empty (``msgstr ""`` on one line) is translated; an entry that
already has a translation is left as it is, as are comments, flags (``#, fuzzy``), references,
``msgctxt``, obsolete entries (``#~``) and the header. For plurals, ``msgstr[0]`` gets the
translation of ``msgid`` and every other ``msgstr[N]`` that of ``msgid_plural``. Placeholders
(``%s``, ``%(name)d``, ``{name}``...: :mod:`contract.placeholders`) are unit tags the model never sees;
inline HTML tags in a message are paired tags. A line that is none of a comment, a keyword
with its quoted string, a continuation string or a blank is a clear error with its number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from contract.errors import InvalidJobError
from contract.placeholders import PLACEHOLDER
from contract.po_strings import CONTINUATION, KEYWORD, PoStringError, unquote
from orchestrator.segmenting.inline_block import segment_of
from orchestrator.segmenting.parts import Code, tokens_between
from orchestrator.segmenting.skeleton import Skeleton

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
# Placeholders (contract.placeholders, the grammar the quality check uses too) and inline HTML tags.
_PLACEHOLDER = re.compile(PLACEHOLDER.pattern + r"|</?[a-zA-Z][^<>]*>")
_TAG_NAME = re.compile(r"</?([a-zA-Z][\w-]*)")


def split_po(source: str, max_chars: int, skeleton: Skeleton, *, retranslate: bool = False) -> None:
    """A gettext catalogue: the empty ``msgstr`` of each untranslated entry becomes a segment.

    With ``retranslate``, a ``msgstr`` that has a translation (on one line or several) is replaced too.
    """
    lines = [m.group(0) for m in _LINE.finditer(source) if m.group(0)]
    entry = _Entry()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1  # 1-based: the line being read
        body = line.rstrip("\r\n")
        stripped = body.strip()
        if not stripped or stripped.startswith("#"):
            entry = _Entry() if not stripped else entry
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

    def has_message(self, plural_index: int) -> bool:
        """Whether ``msgstr[plural_index]`` has a message to translate (the header has none)."""
        if not "".join(self.values.get("msgid", [])).strip():
            return False
        return bool(self.text_for(plural_index).strip())


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
    segment = segment_of(tokens_between(text, _PLACEHOLDER, _placeholder_code), "po", raw=raw, frame=('"', '"'))
    if segment is None:
        skeleton.literal(raw)
    else:
        skeleton.add_segment(segment)
    skeleton.literal(end_line[len(end) :])


def _placeholder_code(match: re.Match[str]) -> Code:
    """A printf or Python placeholder is a unit; an HTML tag in a message opens or closes a pair."""
    raw = match.group(0)
    if not raw.startswith("<") or raw.endswith("/>"):
        return Code(raw, "unit")
    name = _TAG_NAME.match(raw)
    return Code(raw, "close" if raw.startswith("</") else "open", name.group(1).lower() if name else "")


def _unquote(quoted: str, number: int) -> str:
    """The text of a PO string literal, an unknown escape an error naming the line."""
    try:
        return unquote(quoted)
    except PoStringError as exc:
        raise InvalidJobError(f"line {number}: {exc}") from None
