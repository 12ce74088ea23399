"""The names of HTML's elements: what makes ``<name …>`` markup where a format may hold plain ``<words>`` too.

A gettext message or a Markdown paragraph may carry HTML (``<b>``, ``<a href="…">``), but also angle
brackets that are text: ``<standard input>``, ``<decompress>``, dpkg's ``<Standardeingabe>``, a
command's ``<file>`` argument. Only a tag whose name is one of these is markup there; anything else
is words a translator translates.
"""

from __future__ import annotations

HTML_ELEMENTS = frozenset(
    {
        "a", "abbr", "acronym", "address", "area", "article", "aside", "audio", "b", "base", "bdi", "bdo",
        "big", "blink", "blockquote", "body", "br", "button", "canvas", "caption", "center", "cite", "code",
        "col", "colgroup", "data", "datalist", "dd", "del", "details", "dfn", "dialog", "dir", "div", "dl",
        "dt", "em", "embed", "fieldset", "figcaption", "figure", "font", "footer", "form", "frame",
        "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "i",
        "iframe", "img", "input", "ins", "kbd", "label", "legend", "li", "link", "main", "map", "mark",
        "marquee", "math", "menu", "meta", "meter", "nav", "nobr", "noscript", "object", "ol", "optgroup",
        "option", "output", "p", "param", "picture", "pre", "progress", "q", "rp", "rt", "ruby", "s", "samp",
        "script", "search", "section", "select", "slot", "small", "source", "span", "strike", "strong",
        "style", "sub", "summary", "sup", "svg", "table", "tbody", "td", "template", "textarea", "tfoot",
        "th", "thead", "time", "title", "tr", "track", "tt", "u", "ul", "var", "video", "wbr",
    }
)  # fmt: skip
"""Every element of the HTML Living Standard, and the obsolete ones old catalogues still write (``tt``, ``font``)."""


def is_html_element(name: str) -> bool:
    """Whether ``name`` (any case) names an HTML element."""
    return name.lower() in HTML_ELEMENTS
