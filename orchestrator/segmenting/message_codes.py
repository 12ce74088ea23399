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
from markup.html_elements import is_html_element
from orchestrator.segmenting.inline_block import protected
from orchestrator.segmenting.parts import Code, tokens_between

_CODES = re.compile(f"{PLACEHOLDER.pattern}|{DIRECTIVE.pattern}")  # placeholders first: %d is printf's
_TAG = re.compile(r"</?([a-zA-Z][\w-]*)[^<>]*>")
_INTTYPES_MACRO = re.compile(r"<PRI[diouxX]\w*>")  # gettext's %<PRId64>: part of a placeholder, never a tag


def message_tokens(text: str, *, markup: bool = True, html_only: bool = False) -> list[str | Code]:
    """``text`` as text runs and codes: each placeholder or ``%`` directive (strftime's, a tool's own) a unit;
    with ``markup``, each tag an open or close.

    A URL or e-mail address (:func:`protected`) is one unit whole, so a ``%20`` in it is no
    placeholder, and a tag's attribute is never searched for one. With ``html_only`` (a gettext
    message), angle brackets around a name that is no HTML element (``<standard input>``,
    ``<Standardeingabe>``) are text a translator translates; a JSON resource's markup may be its
    own (botocore's ``<important>``), so there every tag is one.
    """
    out: list[str | Code] = []
    position = 0
    for tag in _TAG.finditer(text) if markup else ():
        if _INTTYPES_MACRO.fullmatch(tag.group(0)):
            continue
        if html_only and not is_html_element(tag.group(1)):
            continue
        out += _runs(text[position : tag.start()])
        out.append(_tag_code(tag.group(0), tag.group(1)))
        position = tag.end()
    out += _runs(text[position:])
    return out


def with_message_codes(tokens: Sequence[str | Code], *, markup: bool = True) -> list[str | Code]:
    """``tokens`` with every text run cut at its placeholders (and HTML tags), codes kept as they are."""
    out: list[str | Code] = []
    for token in tokens:
        out += message_tokens(token, markup=markup) if isinstance(token, str) else [token]
    return out


def _runs(text: str) -> list[str | Code]:
    """Text between tags: its URLs and e-mail addresses units first, then each placeholder a unit."""
    out: list[str | Code] = []
    for token in protected([text] if text else []):
        out += tokens_between(token, _CODES, _placeholder) if isinstance(token, str) else [token]
    return out


def _placeholder(match: re.Match[str]) -> Code:
    """A placeholder is a unit, and a word the program fills in."""
    return Code(match.group(0), "unit", worded=True)


def _tag_code(raw: str, name: str) -> Code:
    """A self-closing tag is a unit; an HTML tag opens or closes a pair by its name."""
    if raw.endswith("/>"):
        return Code(raw, "unit")
    return Code(raw, "close" if raw.startswith("</") else "open", name.lower())
