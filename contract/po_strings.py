"""The line grammar of gettext catalogues (``.po``): keyword lines, continuation strings, string literals.

Two readers share it: the documents' splitter (orchestrator/segmenting/gettext.py), which fills a
catalogue's empty ``msgstr``, and ``dragoman eval``'s reader (evaluation/po_reader.py), which takes
its translated pairs.
"""

from __future__ import annotations

import re

from contract.errors import InvalidJobError

KEYWORD = re.compile(r"(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)[ \t]+(\"(?:[^\"\\]|\\.)*\")[ \t]*$")
"""A keyword line (stripped): the keyword, a plural index if any, the quoted string."""
CONTINUATION = re.compile(r"[ \t]*(\"(?:[^\"\\]|\\.)*\")[ \t]*$")
"""A line that continues the previous keyword's string: the quoted string."""
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
"""The C escapes a gettext string may hold, by the letter after the backslash."""


class PoStringError(InvalidJobError):
    """A gettext string literal holds an escape gettext does not know; the caller adds where it is."""


_QUOTE = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"})


def quote(text: str) -> str:
    """``text`` as a PO string literal (``a"b`` -> ``"a\\"b"``), the inverse of :func:`unquote`."""
    return f'"{text.translate(_QUOTE)}"'


def unquote(quoted: str) -> str:
    """The text of a PO string literal (``"a\\"b"`` -> ``a"b``); raises :class:`PoStringError`."""
    out: list[str] = []
    inner = quoted[1:-1]
    index = 0
    while index < len(inner):
        char = inner[index]
        if char == "\\" and index + 1 < len(inner):
            escaped = inner[index + 1]
            if escaped not in ESCAPES:
                raise PoStringError(f"unknown escape \\{escaped} in a gettext string")
            out.append(ESCAPES[escaped])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)
