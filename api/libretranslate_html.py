"""LibreTranslate's ``format: html``: an HTML fragment's markup carried through the model as placeholder tags.

A text sent with ``format=html`` carries markup (``Click <a href="/x">here</a>.``). The model sees
the numbered tags documents use (:mod:`contract.inline_tags`: ``Click <x1>here</x1>.``), the job is
marked ``inline_tags`` (the worker checks the tags, retries once, else translates between them),
and the markup is put back around the translation. An element whose content is never translated
(``script``, ``style``, ``code``, ``translate="no"``...), a void element (``<br>``), a comment and
an element left unclosed become unit tags (``<x2/>``): the model never sees their content.

The tagging is :mod:`markup.placeholders`' HTML, as DeepL's ``tag_handling=html`` does it; this door
adds only its list of elements that hold code rather than prose.
"""

from __future__ import annotations

from markup.placeholders import HTML, TaggedText, to_placeholders

OPAQUE_ELEMENTS = frozenset({"script", "style", "code", "kbd", "samp", "var", "pre", "textarea", "svg", "math"})
"""Elements whose whole content is kept as written (code, markup of another language): one unit tag each."""


def tag_html(fragment: str) -> TaggedText:
    """``fragment``'s markup replaced by numbered placeholder tags (see the module's docstring); linear time."""
    return to_placeholders(fragment, HTML, OPAQUE_ELEMENTS)
