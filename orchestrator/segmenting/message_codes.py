"""The inline codes of a catalogue or resource message: placeholders as unit tags, HTML tags as pairs.

A gettext ``msgid``, a JSON string value and an XLIFF ``<source>`` carry the same things a
program fills in or renders later: placeholders (:mod:`contract.placeholders`, one grammar for
every format) and, in ``.po`` and JSON, HTML markup. Each becomes a :class:`Code`: the model sees
``<x1/>`` for ``%1$s`` and ``<x2>…</x2>`` around a link's text, so neither a placeholder nor a
URL in an attribute ever reaches it, and the translation gets them back exactly as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from contract.placeholders import DIRECTIVE, PLACEHOLDER
from orchestrator.segmenting.parts import Code, tokens_between

_CODES = re.compile(f"{PLACEHOLDER.pattern}|{DIRECTIVE.pattern}")  # placeholders first: %d is printf's
_WITH_MARKUP = re.compile(_CODES.pattern + r"|</?[a-zA-Z][^<>]*>")
_TAG_NAME = re.compile(r"</?([a-zA-Z][\w-]*)")


def message_tokens(text: str, *, markup: bool = True) -> list[str | Code]:
    """``text`` as text runs and codes: each placeholder or ``%`` directive (strftime's, a tool's own) a unit;
    with ``markup``, each HTML tag an open or close."""
    return tokens_between(text, _WITH_MARKUP if markup else _CODES, _code)


def with_message_codes(tokens: Sequence[str | Code], *, markup: bool = True) -> list[str | Code]:
    """``tokens`` with every text run cut at its placeholders (and HTML tags), codes kept as they are."""
    out: list[str | Code] = []
    for token in tokens:
        out += message_tokens(token, markup=markup) if isinstance(token, str) else [token]
    return out


def _code(match: re.Match[str]) -> Code:
    """A placeholder (or a self-closing tag) is a unit; an HTML tag opens or closes a pair by its name."""
    raw = match.group(0)
    if not raw.startswith("<"):
        return Code(raw, "unit", worded=True)  # a placeholder: a word the program fills in
    if raw.endswith("/>"):
        return Code(raw, "unit")
    name = _TAG_NAME.match(raw)
    return Code(raw, "close" if raw.startswith("</") else "open", name.group(1).lower() if name else "")
