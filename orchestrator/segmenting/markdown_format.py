"""Markdown: the blocks come from a CommonMark/GFM parser, each paragraph's sentences whole.

markdown-it-py parses the document (tables without leading pipes, nested lists and quotes,
reference links, HTML blocks and code by construction; front matter is cut off first). Every
paragraph, heading and table cell is one block of prose: its lines are rejoined (a wrapped
paragraph is one sentence to the model, not one fragment per line; a hard line break, two spaces
or a backslash before a line's end, is a break tag the translation keeps), and inside it code spans,
autolinks, bare URLs and inline HTML that is not an element pair are unit tags the model never
sees, while links, images (their alt text is translated), emphasis and inline HTML elements
are paired tags around translated text. Lines no block claims (code, HTML blocks, rules,
link definitions) are kept as they are; HTML blocks go through the HTML splitter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from markup.finder import Finder
from markup.html_elements import is_html_element
from orchestrator.segmenting.html_format import split_html
from orchestrator.segmenting.skeleton import Code, Skeleton

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_INLINE_START = re.compile(r"[`!\]\[<h*_~]")  # where inline markup can begin
_BACKTICKS = re.compile(r"`+")
_URL_END = re.compile(r"[\s)>\]]")
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[A-Za-z0-9.-]+)>")
_HTML_TAG_NAME = re.compile(r"</?([a-zA-Z][a-zA-Z0-9-]*)")
_PROSE_PARENTS = ("paragraph_open", "heading_open", "th_open", "td_open")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def split_markdown(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """Cut a Markdown document into literal syntax and whole-sentence prose segments."""
    lines = [m.group(0) for m in _LINE.finditer(source) if m.group(0)]
    first = _front_matter_end(lines)
    for front in lines[:first]:
        skeleton.literal(front)
    body = lines[first:]
    tokens = _parser().parse("".join(body))
    done = 0  # lines handed to the skeleton so far
    for block in _prose_blocks(tokens):
        start, end = block.lines
        if start < done:  # a block inside one already handled (never expected): keep it as it is
            continue
        for kept in body[done:start]:
            skeleton.literal(kept)
        _block(skeleton, body[start:end], block, max_chars)
        done = end
    for kept in body[done:]:
        skeleton.literal(kept)


def _front_matter_end(lines: list[str]) -> int:
    """How many lines of YAML front matter open the document (0: none)."""
    if not lines or lines[0].rstrip("\r\n") != "---":
        return 0
    for number in range(1, len(lines)):
        if lines[number].rstrip("\r\n") in ("---", "..."):
            return number + 1
    return 0


@dataclass(frozen=True, slots=True)
class _ProseBlock:
    """A paragraph, heading or table row: its source lines and its text (or its cells) as parsed."""

    lines: tuple[int, int]
    contents: tuple[str, ...]  # one for a paragraph or heading, one per cell for a table row
    kind: str  # "paragraph", "heading", "row", "html"


def _prose_blocks(tokens: list[Token]) -> Iterator[_ProseBlock]:
    """The blocks with prose, in document order."""
    row: list[str] = []
    row_lines: tuple[int, int] | None = None
    for index, token in enumerate(tokens):
        if token.type == "tr_open" and token.map:
            row, row_lines = [], (token.map[0], token.map[1])
        elif token.type == "tr_close" and row_lines is not None:
            yield _ProseBlock(row_lines, tuple(row), "row")
            row_lines = None
        elif token.type == "html_block" and token.map:
            yield _ProseBlock((token.map[0], token.map[1]), (token.content,), "html")
        elif token.type == "inline" and index and tokens[index - 1].type in _PROSE_PARENTS:
            if row_lines is not None:
                row.append(token.content)
            elif token.map:
                kind = "heading" if tokens[index - 1].type == "heading_open" else "paragraph"
                yield _ProseBlock((token.map[0], token.map[1]), (token.content,), kind)


def _block(skeleton: Skeleton, lines: list[str], block: _ProseBlock, max_chars: int) -> None:
    """One block's lines: container markers and line ends literal, its text one block of prose."""
    if block.kind == "row":
        _row(skeleton, lines, max_chars)
        return
    if block.kind == "html":
        split_html("".join(lines), max_chars, skeleton)
        return
    content = block.contents[0]
    content_lines = content.split("\n")
    located = _locate(lines, content_lines)
    if located is None:  # the parser's text is not found in the lines: translate them line by line
        for line in lines:
            body = line.rstrip("\r\n")
            skeleton.prose(body, max_chars)
            skeleton.literal(line[len(body) :])
        return
    texts: list[str] = []
    breaks: list[Code] = []
    skeleton.literal(lines[0][: located[0][0]])
    trailing = ""
    hard = False
    for number, (start, end) in enumerate(located):
        if number:  # the line break, the next line's container markers and indentation: one space or a break
            raw = trailing + lines[number - 1][located[number - 1][1] :] + lines[number][:start]
            breaks.append(Code(raw, "break" if hard else "space"))
        text = lines[number][start:end]
        kept = text.rstrip(" \t")
        trailing = text[len(kept) :]
        hard = trailing.startswith("  ") and not trailing.strip(" ")  # two spaces or more: a hard line break
        if not hard and number < len(located) - 1 and _ends_in_escape(kept):  # a backslash before a line end too
            kept, trailing, hard = kept[:-1], kept[-1] + trailing, True
        texts.append(kept)
    last = len(located) - 1
    skeleton.block(_paragraph_inline(texts, breaks), max_chars)
    skeleton.literal(trailing + lines[last][located[last][1] :] + "".join(lines[last + 1 :]))


def _locate(lines: list[str], content_lines: list[str]) -> list[tuple[int, int]] | None:
    """Where each line of the parsed text sits in its source line (``None``: not found)."""
    if len(content_lines) > len(lines):
        return None
    spans: list[tuple[int, int]] = []
    for line, content_line in zip(lines, content_lines, strict=False):
        body = line.rstrip("\r\n")
        content = content_line.lstrip(" \t")  # a continuation line's indentation is not text
        at = body.rfind(content) if content else len(body)
        if at == -1:
            return None
        spans.append((at, at + len(content)))
    return spans


def _row(skeleton: Skeleton, lines: list[str], max_chars: int) -> None:
    """A table row: pipes and padding literal, each cell a block of prose."""
    line = lines[0]
    body = line.rstrip("\r\n")
    for cell in re.split(r"((?<!\\)\|)", body):
        if cell == "|":
            skeleton.literal(cell)
            continue
        stripped = cell.strip()
        lead = len(cell) - len(cell.lstrip())
        skeleton.literal(cell[:lead])
        if stripped:
            skeleton.block(_inline(stripped), max_chars)
        skeleton.literal(cell[lead + len(stripped) :])
    skeleton.literal(line[len(body) :])
    for rest in lines[1:]:
        skeleton.literal(rest)


def _ends_in_escape(text: str) -> bool:
    """Whether ``text`` ends in a backslash that escapes what follows (``\\`` is an escaped backslash)."""
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _paragraph_inline(texts: list[str], breaks: list[Code]) -> list[str | Code]:
    """A paragraph's lines as one run of text runs and codes, each line break its code from ``breaks``.

    A soft break is a ``space`` code, a hard one (two spaces or a backslash before the line end) a
    ``break`` the translation keeps. The inline pass reads the lines joined by a space, as
    CommonMark reads a soft break, so a code span or an HTML tag wrapped over two lines is one code
    and the backticks after it pair as written; a code that spans a break keeps the break's source
    (line end, the next line's markers and indentation) in its raw.
    """
    joined = " ".join(texts)
    break_at: dict[int, Code] = {}  # position of the space standing for a line break -> its code
    position = 0
    for text, line_break in zip(texts, breaks, strict=False):
        position += len(text)
        break_at[position] = line_break
        position += 1
    positions = list(break_at)  # ascending: the lines are in order
    out: list[str | Code] = []
    start = following = 0  # following: the first break not before this token
    for token in _inline(joined):
        raw = token if isinstance(token, str) else token.raw
        end = start + len(raw)
        inside = []
        while following < len(positions) and positions[following] < end:
            inside.append(positions[following])
            following += 1
        if isinstance(token, str):
            previous = start
            for at in inside:
                if at > previous:
                    out.append(joined[previous:at])
                out.append(break_at[at])
                previous = at + 1
            if end > previous:
                out.append(joined[previous:end])
        elif inside:
            out.append(Code(_with_breaks(joined, start, end, inside, break_at), token.kind, token.name))
        else:
            out.append(token)
        start = end
    return out


def _with_breaks(joined: str, start: int, end: int, inside: list[int], break_at: dict[int, Code]) -> str:
    """``joined[start:end]`` with each soft break's space written as the break's source."""
    parts: list[str] = []
    previous = start
    for at in inside:
        parts += [joined[previous:at], break_at[at].raw]
        previous = at + 1
    parts.append(joined[previous:end])
    return "".join(parts)


def _inline(text: str) -> list[str | Code]:
    """One line of prose as text runs and codes: what the model may see and what it must keep."""
    finder = Finder(text)
    code_spans = _code_spans(text)
    out: list[str | Code] = []
    position = scan = 0
    while (start := _INLINE_START.search(text, scan)) is not None:
        begin = start.start()
        if text[begin] == "`":
            end, run_end = code_spans.get(begin, (None, begin + 1))
            code: Code | None = None if end is None else Code(text[begin:end], "unit", worded=True)
        else:
            code, end, run_end = *_inline_code(text, begin, finder), begin + 1
        if code is None or end is None:
            scan = run_end
            continue
        if begin > position:
            out.append(text[position:begin])
        out.append(code)
        position = scan = end
    if position < len(text):
        out.append(text[position:])
    return out


def _inline_code(text: str, start: int, finder: Finder) -> tuple[Code | None, int | None]:
    """The inline markup beginning at ``start`` and where it ends (``(None, None)``: none begins there).

    Linear: closing marks come from ``finder``. An image ``![alt](src)`` and a link ``[text](url)``
    are an opening and a closing code around their text; autolinks and bare http(s) URLs are units
    (bare e-mail and ``www.`` addresses become units later: ``inline_block.protected``); inline HTML
    tags pair by element name, and angle brackets around a name that is no HTML element are text;
    emphasis runs (``*``, ``_``, ``~~``) open where they start a word and close where they end one.
    """
    char = text[start]
    if char == "!":
        return (Code("![", "open", "link"), start + 2) if text.startswith("![", start) else (None, None)
    if char == "[":
        return Code("[", "open", "link"), start + 1
    if char == "]":
        if text.startswith("(", start + 1) or text.startswith("[", start + 1):
            close = finder.find(")" if text[start + 1] == "(" else "]", start + 2)
            return (None, None) if close == -1 else (Code(text[start : close + 1], "close", "link"), close + 1)
        return Code("]", "close", "link"), start + 1
    if char == "<":
        end = _tag_end(text, start, finder)
        if end is None:
            return None, None
        tag = text[start:end]
        name = _HTML_TAG_NAME.match(tag)
        if _AUTOLINK.fullmatch(tag):
            return Code(tag, "unit", worded=True), end
        if name is None or not is_html_element(name.group(1)):
            return None, None  # words: <standard input>, <decompress>
        if tag.endswith("/>"):
            return Code(tag, "unit"), end
        return Code(tag, "close" if tag.startswith("</") else "open", name.group(1).lower()), end
    if char == "h":
        if not text.startswith(("http://", "https://"), start) or (start and text[start - 1].isalnum()):
            return None, None
        scheme = start + (7 if text.startswith("http://", start) else 8)
        end = finder.find(_URL_END, scheme)
        end = len(text) if end == -1 else end
        while end > scheme and text[end - 1] in ".,;:!?":  # a sentence's full stop is not the URL's
            end -= 1
        return (Code(text[start:end], "unit", worded=True), end) if end > scheme else (None, None)
    if char in "*_~":
        return _emphasis(text, start)
    return None, None


def _emphasis(text: str, start: int) -> tuple[Code | None, int | None]:
    """A run of ``*``, ``_`` or ``~~`` that opens (before a word) or closes (after one) emphasis."""
    char = text[start]
    end = start
    while end < len(text) and text[end] == char and end - start < 3:
        end += 1
    run = text[start:end]
    if char == "~" and run != "~~":
        return None, None
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    if before == char or after == char:
        return None, None  # part of a longer run: left as text
    opens = not after.isspace() and not before.isalnum()
    closes = not before.isspace() and not after.isalnum()
    if opens and not closes:
        return Code(run, "open", run), end
    if closes and not opens:
        return Code(run, "close", run), end
    return None, None


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
