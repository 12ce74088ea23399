"""URLs and e-mail addresses in running text: spans no model may rewrite, found in one linear pass.

Every document segmenter asks this module where such spans are, and turns each into a unit
placeholder tag (``<xN/>``), so ``See https://www.gnu.org/licenses/.`` reaches the model as
``See <x1/>.`` and the address comes back byte for byte. Found:

- a URL with a scheme: ``https://…``, ``ftp://…``, any ``scheme://`` followed by a host;
- a ``www.`` address without one (``www.example.org/path``);
- an e-mail address (``bug-wget@gnu.org``), with ``mailto:`` before it if written;
- any of these in angle brackets, brackets and all (``<bug-wget@gnu.org>``, an autolink).

Where a URL ends follows GFM's extended autolinks, as linkifiers do: it runs to whitespace or
``<``, then a trailing ``?!.,:*_~'"`` is punctuation of the sentence, a closing ``)`` without its
``(`` in the URL is the sentence's parenthesis, and a trailing ``&name;`` is an entity reference
after it. Linear: anchors (``://``, ``www.``, ``@``) are found by one regular expression, and each
scan left or right stops at the previous span's end or the next anchor's span, so no character is
read more than a few times whatever the input.
"""

from __future__ import annotations

import re

_ANCHOR = re.compile(r"://|www\.|@", re.IGNORECASE)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+_-")
_DOMAIN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_URL_STOP = frozenset('<>"`\\{}|^')
_TRAILING_PUNCTUATION = frozenset("?!.,:*_~'\"")
_MAILTO = "mailto:"


def protected_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every URL and e-mail address in ``text``, in order, never overlapping."""
    spans: list[tuple[int, int]] = []
    floor = 0  # the end of the last span: no span starts before it
    for anchor in _ANCHOR.finditer(text):
        if anchor.start() < floor:
            continue
        found = _span_at(text, anchor.start(), anchor.group(0), floor)
        if found is None:
            continue
        start, end = _bracketed(text, *found)
        spans.append((start, end))
        floor = end
    return spans


def _span_at(text: str, at: int, anchor: str, floor: int) -> tuple[int, int] | None:
    if anchor == "://":
        return _scheme_url(text, at, floor)
    if anchor == "@":
        return _email(text, at, floor)
    return _www_url(text, at, floor)


def _scheme_url(text: str, at: int, floor: int) -> tuple[int, int] | None:
    start = at
    while start > floor and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    while start < at and not text[start].isalpha():  # a scheme begins with a letter
        start += 1
    if start == at or (start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_")):
        return None
    host = at + 3
    if host >= len(text) or not (text[host].isalnum() or text[host] in "[_/"):  # file:///path
        return None
    end = _trimmed_end(text, host, _url_end(text, host))
    return (start, end) if end > host else None


def _www_url(text: str, at: int, floor: int) -> tuple[int, int] | None:
    if at > 0 and (text[at - 1].isalnum() or text[at - 1] in "._-/@:"):
        return None
    host = at + 4
    if host >= len(text) or not text[host].isalnum():
        return None
    end = _trimmed_end(text, host, _url_end(text, host))
    return (at, end) if end > host else None


def _email(text: str, at: int, floor: int) -> tuple[int, int] | None:
    start = at
    while start > floor and text[start - 1] in _LOCAL_CHARS:
        start -= 1
    while start < at and text[start] == ".":
        start += 1
    mailto = start >= len(_MAILTO) and text[start - len(_MAILTO) : start].lower() == _MAILTO
    if start == at or (not mailto and start > 0 and (text[start - 1].isalnum() or text[start - 1] in "/:")):
        return None
    end = at + 1
    labels = 0
    while True:
        label = end
        while end < len(text) and text[end] in _DOMAIN_CHARS:
            end += 1
        if end == label:
            break
        labels += 1
        if end + 1 < len(text) and text[end] == "." and text[end + 1] in _DOMAIN_CHARS:
            end += 1
            continue
        break
    if labels < 2 or text[end - 1] in "-_":  # GFM: a domain has a dot and never ends in - or _
        return None
    return (start - len(_MAILTO) if mailto else start), end


def _url_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and not text[end].isspace() and text[end] not in _URL_STOP:
        end += 1
    return end


def _trimmed_end(text: str, start: int, end: int) -> int:
    """Where the URL ``text[start:end]`` ends once the sentence's punctuation after it is left out."""
    unmatched = text.count(")", start, end) - text.count("(", start, end)
    while end > start:
        last = text[end - 1]
        if last in _TRAILING_PUNCTUATION:
            end -= 1
        elif last == ")" and unmatched > 0:
            end -= 1
            unmatched -= 1
        elif last == ";":
            end = _entity_start(text, start, end - 1)
        else:
            break
    return end


def _entity_start(text: str, start: int, semicolon: int) -> int:
    """Where ``&name;`` ending at ``semicolon`` starts, or ``semicolon`` itself when it is no entity."""
    name = semicolon
    while name > start and text[name - 1].isascii() and text[name - 1].isalnum():
        name -= 1
    if name < semicolon and name > start and text[name - 1] == "&":
        return name - 1
    return semicolon


def _bracketed(text: str, start: int, end: int) -> tuple[int, int]:
    """The span with the angle brackets around it when it is written ``<…>`` (an autolink)."""
    if start > 0 and end < len(text) and text[start - 1] == "<" and text[end] == ">":
        return start - 1, end + 1
    if start > 3 and end + 3 < len(text) and text[start - 4 : start] == "&lt;" and text[end : end + 4] == "&gt;":
        return start - 4, end + 4
    return start, end
