"""Cutting prose at paragraph and sentence boundaries, shared by document segmenting and the worker.

Both the orchestrator (documents cut into segment jobs) and the worker (a long job cut into
pieces that each fit one generation) need the same rules, so they live here at the bottom:

- a sentence ends at ``.``, ``!`` or ``?`` (with closing quotes or brackets) followed by
  whitespace, unless the word before it is a known abbreviation ("e.g.", "Dr.", "Mr."), an
  initial ("J. Smith"), or the next word starts in lower case;
- in Chinese and Japanese a sentence ends right after an ideographic full stop, or a full-width
  exclamation or question mark (no space follows);
- a sentence longer than the limit is cut at a space, else after clause punctuation (an
  ideographic comma), else between two scripts; only a stretch with none of those is cut at the limit.

Every function returns spans whose concatenation is the input, byte for byte: whitespace
between sentences is a span of its own, so callers keep it literally.
"""

from __future__ import annotations

import re

# Words that end in a full stop without ending a sentence (compared in lower case, without the
# final stop). "etc." is left out on purpose: it ends sentences as often as not.
ABBREVIATIONS = frozenset(
    {
        "e.g",
        "i.e",
        "cf",
        "vs",
        "viz",
        "al",
        "approx",
        "ca",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "jr",
        "st",
        "mt",
        "fig",
        "figs",
        "vol",
        "pp",
        "eds",
        "inc",
        "ltd",
        "corp",
        "dept",
        "gov",
        "lt",
        "capt",
        "rev",
        "hon",
        "jan",
        "feb",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "z.b",
        "bzw",
        "usw",
        "ggf",
        "d.h",
        "mme",
        "mlle",
        "sr",
        "sra",
        "dra",
        "u.s",
        "u.k",
        "a.m",
        "p.m",
    }
)

_CJK_END = "。！？｡"
_CLOSERS = "\"'”’»)]}」』）】〕〉》"
# A candidate end: terminal punctuation (plus closers), then whitespace; or CJK terminal
# punctuation (plus closers) with or without whitespace after it.
_BOUNDARY = re.compile(
    rf"(?:[.!?…]+[{re.escape(_CLOSERS)}]*(?P<space>\s+))"
    rf"|(?:[{_CJK_END}]+[{re.escape(_CLOSERS)}]*(?P<cjk_space>\s*))"
)
_PARAGRAPH_BREAK = re.compile(r"[ \t\r\f\v]*\n(?:[ \t\r\f\v]*\n)+[ \t\r\f\v]*")
_LINE_BREAK = re.compile(r"[ \t\r\f\v]*\n\s*")
_WORD_BEFORE = re.compile(r"(\S+)$")
_SOFT_CJK_BREAK = "、，；：,;:"


def is_cjk(char: str) -> bool:
    """Whether ``char`` is a Han ideograph, kana, Hangul or CJK punctuation (written without spaces)."""
    code = ord(char)
    return (
        0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
        or 0x20000 <= code <= 0x2FA1F
    )


def _is_abbreviation(before: str) -> bool:
    """Whether the text just before a full stop ends with an abbreviation or an initial."""
    match = _WORD_BEFORE.search(before)
    if match is None:
        return False
    word = match.group(1).lstrip("\"'“‘«([{").lower()
    if not word:
        return False
    if word in ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha():  # an initial: "J. Smith"
        return True
    return bool(re.fullmatch(r"(?:[^\W\d_]\.)+[^\W\d_]", word))  # "U.S", "e.g" spelled with other letters


def split_sentences(text: str) -> list[str]:
    """``text`` as sentences and the whitespace between them (``"".join`` gives ``text`` back).

    Whitespace between sentences is a span of its own; a sentence keeps its closing
    punctuation. Text without a boundary comes back as one span.
    """
    spans: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        space = match.group("space")
        end_of_sentence = match.start("space") if space is not None else match.start("cjk_space")
        if space is not None:
            punctuation = text[match.start() : end_of_sentence]
            following = text[match.end() : match.end() + 1]
            # Only the last word matters: a bounded look-back keeps long unbroken text linear.
            if punctuation.startswith(".") and _is_abbreviation(text[max(start, match.start() - 64) : match.start()]):
                continue
            if following and following.islower():  # "... approx. ten" or a stray stop mid-sentence
                continue
            if not following:  # trailing whitespace: part of the text's end, not a boundary
                continue
        if end_of_sentence >= len(text):
            continue
        spans.append(text[start:end_of_sentence])
        gap_end = match.end()
        if gap_end > end_of_sentence:
            spans.append(text[end_of_sentence:gap_end])
        start = gap_end
    if start < len(text):
        spans.append(text[start:])
    return [span for span in spans if span]


def split_paragraphs(text: str, *, lines: bool = False) -> list[str]:
    """``text`` as paragraphs and the breaks between them (``"".join`` gives ``text`` back).

    A break is a run of blank lines (with the spaces around them), or with ``lines`` any line
    break. Breaks are spans of their own, at odd positions when the text starts with prose.
    """
    pattern = _LINE_BREAK if lines else _PARAGRAPH_BREAK
    spans: list[str] = []
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            spans.append(text[start : match.start()])
        spans.append(match.group(0))
        start = match.end()
    if start < len(text):
        spans.append(text[start:])
    return spans


def cut_sentence(text: str, max_chars: int) -> list[str]:
    """A sentence longer than ``max_chars`` in spans of at most ``max_chars``, never inside a word.

    Cuts go, in this order of preference, at the last space before the limit (the space is a
    span of its own), after CJK or Latin clause punctuation, between a CJK character and a
    non-CJK one, after a Japanese particle that a kanji or katakana word follows; only a
    stretch with none of those (one very long word, or unpunctuated Chinese) is cut at the limit.
    """
    spans: list[str] = []
    start = 0  # walked by index: re-slicing the rest each time made a megabyte without punctuation quadratic
    while len(text) - start > max_chars:
        cut = start + _cut_point(text[start : start + max_chars + 1], max_chars)
        spans.append(text[start:cut])
        after = cut
        while after < len(text) and text[after].isspace():
            after += 1
        if after > cut:
            spans.append(text[cut:after])
        start = after
    if start < len(text):
        spans.append(text[start:])
    return spans


def _cut_point(text: str, max_chars: int) -> int:
    """Where to cut ``text`` so that the first part has at most ``max_chars`` characters (> 0)."""
    window = text[: max_chars + 1]
    space = max(window.rfind(" ", 1, max_chars + 1), window.rfind("\t", 1, max_chars + 1))
    if space > 0:
        return space
    last = min(max_chars, len(text) - 1)
    for index in range(last, 0, -1):
        if text[index - 1] in _SOFT_CJK_BREAK:
            return index
    for index in range(last, 0, -1):
        before, after = text[index - 1], text[index]
        if (
            is_cjk(before) != is_cjk(after)
            or _is_katakana(before) != _is_katakana(after)  # a katakana word begins or ends
            or (before in _PARTICLES and _is_kanji_or_katakana(after))  # after a particle
        ):
            return index
    return max_chars


def _is_katakana(char: str) -> bool:
    return 0x30A0 <= ord(char) <= 0x30FF


_PARTICLES = "をはがにでとのもへや"


def _is_kanji_or_katakana(char: str) -> bool:
    code = ord(char)
    return 0x30A0 <= code <= 0x30FF or 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF


def cut_prose(text: str, max_chars: int) -> list[str]:
    """``text`` in spans of at most ``max_chars``: whole sentences packed together, long ones cut.

    Whitespace between spans is a span of its own (``"".join`` gives ``text`` back).
    """
    if len(text) <= max_chars:
        return [text]
    spans: list[str] = []
    current = ""
    for span in split_sentences(text):
        if span.isspace():
            if current:
                spans.append(current)
                current = ""
            spans.append(span)
        elif len(current) + len(span) <= max_chars:
            current += span
        else:
            if current:
                spans.append(current)
            current = ""
            if len(span) <= max_chars:
                current = span
            else:
                spans.extend(cut_sentence(span, max_chars))
    if current:
        spans.append(current)
    return spans
