"""Markdown: prose is translated; code, markup, URLs and table pipes are kept as they are.

Line by line: fenced and indented code blocks, front matter, HTML lines, link definitions and
horizontal rules are literal; heading markers, list markers, block quotes and table cells keep
their syntax while the text in them becomes segments. Inside a line, inline code, link and image
targets, autolinks, bare URLs and inline HTML tags are literal, so a segment never carries them.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.skeleton import Skeleton

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BLANK = re.compile(r"^\s*$")
_HR = re.compile(r"^ {0,3}([-*_])( *\1){2,} *$")
_HEADING = re.compile(r"^( {0,3}#{1,6}(?:[ \t]+|$))(.*?)([ \t]+#+[ \t]*)?$")
_QUOTE = re.compile(r"^( {0,3}>[ \t]?)")
_LIST = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*\S")
_HTML_LINE = re.compile(r"^ {0,3}<(?:[a-zA-Z/!?])")
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_INLINE_LITERAL = re.compile(
    r"(`+).*?\1"  # inline code
    r"|!\[[^\]]*\]\([^)]*\)"  # image: alt text and target kept
    r"|\]\([^)]*\)|\]\[[^\]]*\]|\["  # link brackets and targets (the link text is a segment)
    r"|<[a-zA-Z][^>\s]*:[^>\s]*>"  # autolink
    r"|</?[a-zA-Z][^>]*>"  # inline HTML tag
    r"|https?://[^\s)>\]]+"  # bare URL
    r"|\\.",  # backslash escape
)


def split_markdown(source: str, max_chars: int) -> Skeleton:
    """Cut a Markdown document into literal syntax and prose segments."""
    skeleton = Skeleton()
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
    return skeleton


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
    """One line of a paragraph, heading, quote, list item or table row; True if it is a list item."""
    quote = _QUOTE.match(body)
    if quote:
        skeleton.literal(quote.group(1))
        return _block_line(skeleton, body[quote.end() :], max_chars)
    heading = _HEADING.match(body)
    if heading:
        skeleton.literal(heading.group(1))
        _inline(skeleton, heading.group(2), max_chars)
        skeleton.literal(heading.group(3) or "")
        return False
    item = _LIST.match(body)
    if item:
        skeleton.literal(item.group(1))
        _block_line(skeleton, body[item.end() :], max_chars)
        return True
    if "|" in body and body.lstrip().startswith("|"):
        for cell in re.split(r"((?<!\\)\|)", body):
            if cell == "|":
                skeleton.literal(cell)
            else:
                _inline(skeleton, cell, max_chars)
        return False
    _inline(skeleton, body, max_chars)
    return False


def _inline(skeleton: Skeleton, text: str, max_chars: int) -> None:
    """Prose with inline code, link targets, URLs and tags cut out as literals."""
    position = 0
    for match in _INLINE_LITERAL.finditer(text):
        skeleton.prose(text[position : match.start()], max_chars)
        skeleton.literal(match.group(0))
        position = match.end()
    skeleton.prose(text[position:], max_chars)
