"""A gettext catalogue (``.po``) with human translations: each translated ``msgid``/``msgstr`` is a pair.

Skipped: the header (``msgid ""``), entries marked ``#, fuzzy`` (a translator's unchecked guess),
empty ``msgstr`` (untranslated), obsolete entries (``#~``). A plural entry gives ``msgid`` with
``msgstr[0]``, its first form. The target language is the header's ``Language:``; gettext does
not record the source language (``--from`` says it). orchestrator/segmenting/gettext.py parses
catalogues to *fill* them (into a document skeleton, a floor above this package); this reader
only needs the pairs, so it is a small one of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from contract.po_strings import CONTINUATION, KEYWORD, PoStringError, unquote
from evaluation.segments import EvaluationInputError, Segment
from evaluation.text_files import read_text_file

_LANGUAGE = re.compile(r"^Language:[ \t]*([^\s\\]+)", re.MULTILINE)


@dataclass(slots=True)
class _Entry:
    """The entry being read: its strings by keyword (``msgstr[0]`` as ``msgstr0``), flags and first line."""

    line: int = 0
    fuzzy: bool = False
    strings: dict[str, list[str]] = field(default_factory=dict)
    current: str | None = None

    def text(self, key: str) -> str:
        return "".join(self.strings.get(key, []))


def read_po(path: Path) -> list[Segment]:
    """The translated entries of the catalogue at ``path``, in file order."""
    text = read_text_file(path)
    entries: list[_Entry] = []
    entry = _Entry()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            entry = _close(entry, entries, path)
            continue
        if line.startswith("#"):
            if entry.strings:  # a comment after strings starts the next entry
                entry = _close(entry, entries, path)
            if line.startswith("#,") and "fuzzy" in (flag.strip() for flag in line[2:].split(",")):
                entry.fuzzy = True
            continue  # obsolete entries (#~) are comments too: never read
        keyword = KEYWORD.match(line)
        if keyword is not None:
            name, index, quoted = keyword.groups()
            key = "msgstr" + index if index is not None else name
            if name in ("msgctxt", "msgid") and any(k.startswith("msgstr") for k in entry.strings):
                entry = _close(entry, entries, path)  # a new entry without a blank line before it
            entry.line = entry.line or number
            entry.current = key
            entry.strings[key] = [_unquote(quoted, path, number)]
            continue
        continuation = CONTINUATION.match(line)
        if continuation is None or entry.current is None:
            raise EvaluationInputError(
                f"{path}:{number}: not a gettext catalogue line (a comment, a keyword with a quoted string, "
                f"or a quoted continuation): {raw[:60]!r}"
            )
        entry.strings[entry.current].append(_unquote(continuation.group(1), path, number))
    _close(entry, entries, path)
    header = next((e for e in entries if "msgid" in e.strings and not e.text("msgid")), None)
    language = _LANGUAGE.search(header.text("msgstr")) if header is not None else None
    target = language.group(1) if language is not None else None
    return [
        Segment(entry.text("msgid"), reference, f"{path}:{entry.line}", None, target)
        for entry in entries
        if entry.text("msgid") and not entry.fuzzy and (reference := entry.text("msgstr") or entry.text("msgstr0"))
    ]


def _close(entry: _Entry, entries: list[_Entry], path: Path) -> _Entry:
    """Keep ``entry`` if it has strings; return a fresh one."""
    if entry.strings:
        if "msgid" not in entry.strings:
            raise EvaluationInputError(f"{path}:{entry.line}: a gettext entry without msgid")
        entries.append(entry)
        return _Entry()
    return entry


def _unquote(quoted: str, path: Path, number: int) -> str:
    """The text of a PO string literal, an unknown escape an error naming the file and line."""
    try:
        return unquote(quoted)
    except PoStringError as exc:
        raise EvaluationInputError(f"{path}:{number}: {exc}") from None
