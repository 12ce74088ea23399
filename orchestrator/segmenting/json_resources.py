"""JSON i18n resource files: every string value is translated; keys, numbers and layout are kept.

The file must parse as JSON (a clear error with line and column otherwise). A linear scan then
finds each string; a string followed by ``:`` is a key and stays. In a value, ICU message
syntax stays as it is: a simple argument (``{count}``, ``{n, number}``) is a unit tag the model
never sees, and a ``plural``/``select`` argument's branches (``one {# file}``) are translated
one by one, their syntax literal and ``#`` a unit tag. A value's placeholders and HTML markup get
the same treatment as a gettext message's (:mod:`orchestrator.segmenting.message_codes`):
``%1$s`` or ``{name}`` a unit tag, ``<a href="…">text</a>`` a pair of tags whose URL never reaches
the model. Values that are only a URL or an e-mail address, that look like a regular expression
or an identifier (a code such as ``"ABW"``, ``"US-CA"``; ``snake_case``, ``camelCase``, a dotted or
``#`` name, a ``/path``: one token a program reads, not a word a reader does) or that have no
letters (``"\u00a0"``, ``"42 %"``) are kept as they are. The model sees the
decoded text; the translation is written back escaped as a JSON string.
"""

from __future__ import annotations

import json
import re

from contract.errors import InvalidJobError
from orchestrator.segmenting.message_codes import with_message_codes
from orchestrator.segmenting.parts import Code, tokens_between
from orchestrator.segmenting.skeleton import Skeleton

_KEEP_VALUE = re.compile(r"\s*(?:[a-zA-Z][a-zA-Z0-9+.-]*://\S*|[^@\s]+@[^@\s]+\.\w+)\s*")
_BRANCHING = ("plural", "select", "selectordinal")
_SIMPLE_ARGUMENT = re.compile(r"\{[^{}]*\}")
_HEADER = re.compile(r"\{\s*[\w.]+\s*,\s*(\w+)\s*,\s*(?:offset:\d+\s*)?(?:=\d+|[a-zA-Z_]+)\s*\{")
_NEXT_BRANCH = re.compile(r"\s*(?:=\d+|[a-zA-Z_]+)\s*\{")
_ARGUMENT_END = re.compile(r"\s*\}")
_BRANCH_UNITS = re.compile(r"\{[^{}]*\}|#")
_HAS_WORDS = re.compile(r"[^\W\d_]", re.UNICODE)
_IDENTIFIER = re.compile(
    r"[A-Z]{1,4}"  # a code: ABW, AW, PUT
    r"|[A-Z0-9]+(?:[-_][A-Z0-9]+)+"  # US-CA, ISO_8859-1
    r"|[\w$]+(?:[._#:][\w$-]+)+"  # aws.auth#sigv4, snake_case, app.title, urn:x
    r"|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+"  # camelCase
    r"|/[\w./{}-]*"  # /archive-rule, /v1/{id}
)
_REGEX_SIGNS = re.compile(r"^\^.|\\[dwsbDWSB]|\(\?[:=!<]|\[[^\]]*-[^\]]*\][*+?{]")  # ^…, \d, (?:, [a-z]+


def split_json(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """A JSON resource file: string values as prose, everything else literal."""
    try:
        json.loads(source)
    except json.JSONDecodeError as exc:
        raise InvalidJobError(f"this is not a JSON file: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise InvalidJobError("this JSON file is nested too deeply to read (thousands of levels)") from None
    position = 0
    index = source.find('"')
    while index != -1:
        end = _string_end(source, index)
        after = end
        while after < len(source) and source[after] in " \t\r\n":
            after += 1
        is_key = after < len(source) and source[after] == ":"
        skeleton.literal(source[position : index + 1])
        raw = source[index + 1 : end - 1]
        if is_key or _kept(json.loads(source[index:end])):
            skeleton.literal(raw)
        else:
            _value(skeleton, raw, max_chars)
        skeleton.literal('"')
        position = end
        index = source.find('"', end)
    skeleton.literal(source[position:])


def _string_end(source: str, start: int) -> int:
    """Just past the closing quote of the string literal opening at ``start`` (the file is valid JSON)."""
    index = start + 1
    while True:
        quote = source.find('"', index)
        backslashes = 0
        while source[quote - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return quote + 1
        index = quote + 1


def _kept(value: str) -> bool:
    """Whether a string value stays as it is: no letters, only a URL, an e-mail address, an identifier or a regex."""
    return (
        not _HAS_WORDS.search(value)
        or bool(_KEEP_VALUE.fullmatch(value))
        or bool(_IDENTIFIER.fullmatch(value))
        or _looks_like_regex(value)
    )


def _looks_like_regex(value: str) -> bool:
    """A value without spaces that has signs of a regular expression (``^…$``, ``\\d``, ``(?:``) and compiles."""
    if not value or any(char.isspace() for char in value) or not _REGEX_SIGNS.search(value):
        return False
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def _value(skeleton: Skeleton, raw: str, max_chars: int) -> None:
    """One string value (still JSON-escaped): its message runs as prose, its ICU syntax literal."""
    for kind, chunk in _icu_chunks(raw):
        if kind == "syntax":
            skeleton.literal(chunk)
        else:
            skeleton.block(_run_tokens(chunk, in_branch=kind == "branch"), max_chars, escape="json")


def _run_tokens(run: str, *, in_branch: bool) -> list[str | Code]:
    """A message run as text and codes: simple ICU arguments, ``#`` inside a plural branch, placeholders, HTML tags."""
    units = tokens_between(
        run, _BRANCH_UNITS if in_branch else _SIMPLE_ARGUMENT, lambda m: Code(m.group(0), "unit", worded=True)
    )
    return with_message_codes(units)


def _icu_chunks(raw: str) -> list[tuple[str, str]]:
    """``raw`` as ("text" | "branch", message) and ("syntax", ICU syntax) chunks, in order.

    Malformed ICU (braces that do not close) leaves the whole value one text chunk.
    """
    chunks: list[tuple[str, str]] = []
    stack: list[str] = []  # "argument" braces inside messages, "branch" braces of plural/select branches
    run_start = 0
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "{":
            header = _branching_header(raw, index)
            if header is None:
                simple = _SIMPLE_ARGUMENT.match(raw, index)
                index = simple.end() if simple else index + 1  # an argument stays in the run: a unit tag later
                continue
            chunks.append(("branch" if stack else "text", raw[run_start:index]))
            chunks.append(("syntax", raw[index:header]))
            stack += ["argument", "branch"]
            run_start = index = header
            continue
        if char == "}" and stack:
            chunks.append(("branch", raw[run_start:index]))
            stack.pop()  # the branch's closing brace
            next_branch = _NEXT_BRANCH.match(raw, index + 1)
            if next_branch is not None:
                stack.append("branch")
                chunks.append(("syntax", raw[index : next_branch.end()]))
                run_start = index = next_branch.end()
                continue
            closing = _ARGUMENT_END.match(raw, index + 1)
            if closing is None:
                return [("text", raw)]
            stack.pop()  # the argument's closing brace
            chunks.append(("syntax", raw[index : closing.end()]))
            run_start = index = closing.end()
            continue
        index += 1
    if stack:
        return [("text", raw)]
    chunks.append(("text", raw[run_start:]))
    return [chunk for chunk in chunks if chunk[1]]


def _branching_header(raw: str, start: int) -> int | None:
    """For ``{count, plural, offset:1 one {`` at ``start``: just past the first branch's ``{``; else ``None``."""
    match = _HEADER.match(raw, start)
    if match is None or match.group(1) not in _BRANCHING:
        return None
    return match.end()
