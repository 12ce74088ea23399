"""Markdown: prose is translated; code, markup, URLs and table pipes are kept as they are.

Line by line: fenced and indented code blocks, front matter, HTML lines, link definitions and
horizontal rules are literal; heading markers, list markers, block quotes and table cells keep
their syntax while the text in them becomes segments. Inside a line, inline code, link and image
targets, autolinks, bare URLs and inline HTML tags are literal, so a segment never carries them.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.finder import Finder
from orchestrator.segmenting.skeleton import Skeleton

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BLANK = re.compile(r"^\s*$")
_HR = re.compile(r"^ {0,3}([-*_])( *\1){2,} *$")
_HEADING = re.compile(r"( {0,3}#{1,6}(?:[ \t]+|$))")
_QUOTE = re.compile(r"( {0,3}>[ \t]?)")
_LIST = re.compile(r"([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*\S")
_HTML_LINE = re.compile(r"^ {0,3}<(?:[a-zA-Z/!?])")
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_INLINE_START = re.compile(r"[`!\]\[<h\\]")  # where an inline literal can begin
_BACKTICKS = re.compile(r"`+")
_URL_END = re.compile(r"[\s)>\]]")


def split_markdown(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """Cut a Markdown document into literal syntax and prose segments."""
    lines = source.splitlines(keepends=True)
    fence: str | None = None
    previous_blank = True
    in_list = False
    front_matter = bool(lines) and lines[0].rstrip("\r\n") == "---"
    for number, line in enumerate(lines):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        if front_matter:
            skeleton.literal(line)
            front_matter = not (number > 0 and body in ("---", "..."))
            continue
        if fence is not None:
            skeleton.literal(line)
            if body.strip().startswith(fence) and not body.strip().strip(fence[0]):
                fence = None
            continue
        opening = _FENCE.match(body)
        if opening:
            fence = opening.group(1)
            skeleton.literal(line)
            previous_blank = False
            continue
        blank = bool(_BLANK.match(body))
        # Indented lines after a blank line are code, unless they continue a list item.
        indented_code = not blank and previous_blank and not in_list and bool(re.match(r"^( {4}|\t)", body))
        if blank or indented_code or _is_literal_line(body, previous_blank):
            skeleton.literal(line)
            previous_blank = blank or (indented_code and previous_blank)
            continue
        in_list = _block_line(skeleton, body, max_chars) or (in_list and body[:1] in (" ", "\t"))
        skeleton.literal(ending)
        previous_blank = False


def _is_literal_line(body: str, previous_blank: bool) -> bool:
    """Lines with nothing to translate: rules, link definitions, HTML, table delimiters, setext underlines."""
    return bool(
        _HR.match(body)
        or _LINK_DEFINITION.match(body)
        or _HTML_LINE.match(body)
        or ("|" in body and _TABLE_DELIMITER.match(body))
        or (not previous_blank and _SETEXT_UNDERLINE.match(body))
    )


def _block_line(skeleton: Skeleton, body: str, max_chars: int) -> bool:
    """One line of a paragraph, heading, quote, list item or table row; True if it is a list item.

    Quote and list markers are peeled off in a loop, not by recursion: ``> > > ...`` nested ten
    thousand deep is one more turn each, never a deeper stack.
    """
    is_item = False
    position = 0  # matched from a position, never by slicing: peeling stays linear however deep
    while True:
        quote = _QUOTE.match(body, position)
        if quote:
            skeleton.literal(quote.group(1))
            position = quote.end()
            continue
        heading = _HEADING.match(body, position)
        if heading:
            skeleton.literal(heading.group(1))
            text, closing = _closing_sequence(body[heading.end() :])
            _inline(skeleton, text, max_chars)
            skeleton.literal(closing)
            return is_item
        item = _LIST.match(body, position)
        if item:
            skeleton.literal(item.group(1))
            position = item.end()
            is_item = True
            continue
        rest = body[position:]
        if "|" in rest and rest.lstrip().startswith("|"):
            for cell in re.split(r"((?<!\\)\|)", rest):
                if cell == "|":
                    skeleton.literal(cell)
                else:
                    _inline(skeleton, cell, max_chars)
            return is_item
        _inline(skeleton, rest, max_chars)
        return is_item


def _closing_sequence(text: str) -> tuple[str, str]:
    """A heading's text and its optional closing ``#``s (with the blanks around them), found without backtracking."""
    trimmed = text.rstrip(" \t")
    unhashed = trimmed.rstrip("#")
    if unhashed == trimmed or not unhashed.endswith((" ", "\t")):
        return text, ""
    cut = len(unhashed.rstrip(" \t"))
    return text[:cut], text[cut:]


def _inline(skeleton: Skeleton, text: str, max_chars: int) -> None:
    """Prose with inline code, link targets, URLs and tags cut out as literals."""
    finder = Finder(text)
    code = _code_spans(text)
    position = 0
    scan = 0
    while (start := _INLINE_START.search(text, scan)) is not None:
        begin = start.start()
        if text[begin] == "`":
            end, run_end = code.get(begin, (None, begin + 1))
        else:
            end, run_end = _inline_literal_end(text, begin, finder), begin + 1
        if end is None:
            scan = run_end
            continue
        skeleton.prose(text[position:begin], max_chars)
        skeleton.literal(text[begin:end])
        position = scan = end
    skeleton.prose(text[position:], max_chars)


def _inline_literal_end(text: str, start: int, finder: Finder) -> int | None:
    """Where the inline literal beginning at ``start`` ends, or ``None`` if none begins there.

    The literals (inline code apart, see :func:`_code_spans`): images with their target,
    link brackets and targets (the link text between them is prose), autolinks and inline HTML
    tags, bare http(s) URLs, backslash escapes. Closing marks come from ``finder``: linear time.
    """
    char = text[start]
    if char == "!":
        if not text.startswith("![", start):
            return None
        bracket = finder.find("]", start + 2)
        if bracket == -1 or not text.startswith("(", bracket + 1):
            return None
        close = finder.find(")", bracket + 2)
        return None if close == -1 else close + 1
    if char == "]":
        if text.startswith("(", start + 1) or text.startswith("[", start + 1):
            close = finder.find(")" if text[start + 1] == "(" else "]", start + 2)
            return None if close == -1 else close + 1
        return None
    if char == "[":
        return start + 1
    if char == "<":
        return _tag_end(text, start, finder)
    if char == "h":
        if not text.startswith(("http://", "https://"), start):
            return None
        scheme = start + (7 if text.startswith("http://", start) else 8)
        end = finder.find(_URL_END, scheme)
        end = len(text) if end == -1 else end
        return end if end > scheme else None
    return start + 2 if start + 1 < len(text) else None  # a backslash escapes the next character


def _code_spans(text: str) -> dict[int, tuple[int | None, int]]:
    """For each backtick run: where the code span it opens ends (``None``: not closed), and where the run ends.

    A span is closed by the next run of the same length (CommonMark's rule); one pass from the
    right pairs them all, so a line of ten thousand unclosed runs costs no more than one.
    """
    runs = [(match.start(), match.end()) for match in _BACKTICKS.finditer(text)]
    spans: dict[int, tuple[int | None, int]] = {}
    next_of_length: dict[int, int] = {}  # run length -> end of the nearest such run to the right
    for start, end in reversed(runs):
        spans[start] = (next_of_length.get(end - start), end)
        next_of_length[end - start] = end
    return spans


def _tag_end(text: str, start: int, finder: Finder) -> int | None:
    """An autolink ``<scheme:...>`` or an inline HTML tag ``<a ...>`` / ``</a>`` at ``start``."""
    name = start + 2 if text.startswith("</", start) else start + 1
    if name >= len(text) or not text[name].isascii() or not text[name].isalpha():
        return None
    close = finder.find(">", name + 1)
    return None if close == -1 else close + 1
