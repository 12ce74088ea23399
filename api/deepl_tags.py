"""DeepL's ``tag_handling`` (``xml``, ``html``) on dragoman's placeholder tags (:mod:`markup.placeholders`).

The markup of a text is swapped for numbered placeholders before the job is queued, as documents'
inline markup is: an element whose content is translated becomes a pair ``<xN>…</xN>``; a
self-closing or void element (``<br>``, ``<img>``), a comment, a processing instruction, a CDATA
section, a stray closing tag, and a whole element whose content must not be translated (named in
``ignore_tags``; in HTML also ``script``, ``style``, one with ``translate="no"`` or class
``notranslate``) becomes a unit ``<xN/>``. The worker keeps the placeholders (checked, retried once,
else the text between them translated on its own) and :func:`restore` puts the original markup back,
byte for byte.

DeepL's ``splitting_tags``, ``non_splitting_tags``, ``outline_detection`` and ``tag_handling_version``
are accepted and ignored: dragoman translates each text whole, so there is no sentence splitting to steer.
"""

from __future__ import annotations

from markup.placeholders import HTML, XML, Dialect, TaggedText, restore
from markup.placeholders import to_placeholders as _to_placeholders

__all__ = ["TAG_HANDLINGS", "TaggedText", "restore", "to_placeholders"]

_DIALECTS: dict[str, Dialect] = {"xml": XML, "html": HTML}

TAG_HANDLINGS = tuple(_DIALECTS)
"""The ``tag_handling`` values taken."""


def to_placeholders(text: str, tag_handling: str, ignore_tags: frozenset[str] = frozenset()) -> TaggedText:
    """``text`` with its markup swapped for placeholder tags, read as ``tag_handling`` (``xml`` or ``html``) says.

    ``ignore_tags``: DeepL's elements whose content is kept as it is (each a unit tag, content and all).
    Linear in the text; raises :class:`~markup.placeholders.TooMuchMarkupError` for markup past what
    placeholders can number.
    """
    return _to_placeholders(text, _DIALECTS[tag_handling], ignore_tags)
