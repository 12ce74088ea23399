"""DeepL's glossary entry formats: TSV and CSV in, TSV out, every bad line named.

``tsv``: one ``source<TAB>target`` entry a line. ``csv``: ``source,target`` (RFC 4180 quoting), with
DeepL's optional third and fourth columns (the entry's source and target language) accepted and
ignored. Blank lines are skipped. A line without two terms, a term with a tab or control character,
an empty term, a term longer than :data:`~contract.controls.MAX_TERM_BYTES` (DeepL's 1,024 UTF-8 bytes) or a
source term given twice is a :class:`GlossaryEntriesError` naming its line; the terms are trimmed. Entries of
more than :data:`MAX_GLOSSARY_BYTES` (DeepL's 10 MiB) are refused before a line is read.
"""

from __future__ import annotations

import csv
import unicodedata

from api.glossary_terms import TermFinder
from contract.controls import MAX_TERM_BYTES, term_bytes
from contract.errors import InvalidGlossaryError, shown
from producer.groups import storable

ENTRIES_FORMATS = ("tsv", "csv")
"""The ``entries_format`` values a glossary is created with."""

MAX_GLOSSARY_NAME_BYTES = 1_024
"""Longest glossary name, in UTF-8 bytes (DeepL's limit)."""

MAX_GLOSSARY_BYTES = 10 * 1024 * 1024
"""Largest glossary: the UTF-8 bytes of its entries as sent (DeepL's 10 MiB)."""

MAX_GLOSSARY_ENTRIES = 10_000
"""Most entries one stored glossary may hold: a translation request reads its terms into a matcher
(:class:`~api.glossary_terms.TermFinder`) whose building grows with them (10,000 terms: about 0.3 s of a work
thread); a glossary of DeepL's 10 MiB of long terms fits, one of more short terms does not."""


class GlossaryEntriesError(InvalidGlossaryError):
    """Glossary entries that cannot be stored: the message names the line and what is wrong with it."""


def glossary_name(name: str) -> str:
    """``name`` if a glossary may be called so: not blank, at most :data:`MAX_GLOSSARY_NAME_BYTES`, storable."""
    if not name.strip():
        raise GlossaryEntriesError("Parameter 'name' must not be empty")
    size = len(name) if len(name) > MAX_GLOSSARY_NAME_BYTES else term_bytes(name)
    if size > MAX_GLOSSARY_NAME_BYTES:
        raise GlossaryEntriesError(f"the glossary name is {size:,} bytes (UTF-8); at most {MAX_GLOSSARY_NAME_BYTES:,}")
    return storable(name, "the glossary name") or name


def parse_entries(text: str, entries_format: str) -> list[tuple[str, str]]:
    """The ``(source, target)`` entries of ``text`` in ``entries_format`` (``tsv`` or ``csv``), in order.

    Raises :class:`GlossaryEntriesError` naming the first bad line, or for no entry at all, or for entries of more
    than :data:`MAX_GLOSSARY_BYTES` (before any line is read).
    """
    if entries_format not in ENTRIES_FORMATS:
        raise GlossaryEntriesError(
            f"Value for 'entries_format' not supported: {shown(entries_format)}; use {' or '.join(ENTRIES_FORMATS)}"
        )
    check_glossary_size(text)
    lines = text.splitlines()
    entries: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        # One line's fields at a time, dropped once read: kept, half a million lists would set off the garbage
        # collector's full passes, each a pause of every thread, the event loop's too.
        fields = line.split("\t") if entries_format == "tsv" else _csv_fields(number, line)
        source, target = _terms(number, fields, entries_format)
        if source in seen:
            raise GlossaryEntriesError(f"line {number}: source term {shown(source)} is given twice")
        seen.add(source)
        entries.append((source, target))
        if len(entries) > MAX_GLOSSARY_ENTRIES:
            total = len(entries) + sum(1 for rest in lines[number:] if rest.strip())
            raise GlossaryEntriesError(
                f"the glossary has {total:,} entries; at most {MAX_GLOSSARY_ENTRIES:,} are allowed"
            )
    if not entries:
        raise GlossaryEntriesError("the glossary has no entries; give at least one line of source and target term")
    return entries


def _csv_fields(number: int, line: str) -> list[str]:
    """Line ``number``'s CSV fields; a line Python's ``csv`` refuses (a field over its 128 KiB limit, a NUL) is a
    :class:`GlossaryEntriesError` naming it, not ``csv.Error``'s 500."""
    try:
        return next(csv.reader((line,)), [])
    except csv.Error as exc:
        raise GlossaryEntriesError(
            f"line {number}: not a CSV line a glossary can hold ({exc}); a term is at most {MAX_TERM_BYTES:,} bytes"
        ) from None


def check_glossary_size(text: str) -> None:
    """Refuse entries of more than :data:`MAX_GLOSSARY_BYTES` of UTF-8 (DeepL's 10 MiB per glossary)."""
    size = len(text) if len(text) > MAX_GLOSSARY_BYTES else term_bytes(text)
    if size > MAX_GLOSSARY_BYTES:
        raise GlossaryEntriesError(
            f"the glossary's entries are {size:,} bytes (UTF-8), over the {MAX_GLOSSARY_BYTES:,} (10 MiB) a glossary "
            "may hold; split it into several glossaries"
        )


def _terms(number: int, fields: list[str], entries_format: str) -> tuple[str, str]:
    """The trimmed source and target term of line ``number``'s fields; a named error otherwise."""
    if entries_format == "tsv" and len(fields) > 2:
        raise GlossaryEntriesError(f"line {number}: a term contains a tab; a TSV line is source<TAB>target")
    if len(fields) < 2 or (entries_format == "csv" and len(fields) not in (2, 4)):
        separator = "a tab" if entries_format == "tsv" else "a comma"
        raise GlossaryEntriesError(f"line {number}: expected a source and a target term separated by {separator}")
    source, target = fields[0].strip(), fields[1].strip()
    for side, term in (("source", source), ("target", target)):
        if not term:
            raise GlossaryEntriesError(f"line {number}: the {side} term is empty")
        size = term_bytes(term)
        if size > MAX_TERM_BYTES:
            raise GlossaryEntriesError(
                f"line {number}: the {side} term is {size:,} bytes (UTF-8); at most {MAX_TERM_BYTES:,} are allowed"
            )
        if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in term):
            raise GlossaryEntriesError(f"line {number}: the {side} term {shown(term)} contains a control character")
    return source, target


def to_tsv(entries: list[tuple[str, str]]) -> str:
    """The entries as DeepL answers them: ``source<TAB>target`` lines."""
    return "\n".join(f"{source}\t{target}" for source, target in entries)


def terms_in(entries: list[tuple[str, str]], text: str) -> dict[str, str]:
    """The entries whose source term occurs in ``text`` (ignoring case): the glossary one job carries.

    A stored glossary may hold thousands of terms; a job carries at most
    :data:`~contract.controls.MAX_GLOSSARY_TERMS`, and only those in its text matter to its prompt
    (past that many found, the longest are kept: a longer term is the more specific one). For many
    texts against one glossary, read it once: :class:`~api.glossary_terms.TermFinder`.
    """
    return TermFinder(entries).terms_in(text)


def document_terms(entries: list[tuple[str, str]], text: str | None) -> dict[str, str]:
    """The glossary every segment job of a document carries: the terms found in its ``text``.

    ``text`` None (a binary format such as ``.docx``, not searchable before it is split): every term,
    the longest first past :data:`~contract.controls.MAX_GLOSSARY_TERMS`.
    """
    finder = TermFinder(entries)
    return finder.terms_in(text) if text is not None else finder.every_term()
