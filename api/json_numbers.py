"""Numbers no field can hold: ``1e400`` (past a float's range), ``NaN`` and ``Infinity`` in a JSON body.

JSON has no infinite or not-a-number value, but Python's parser reads ``NaN``, ``Infinity`` and
``-Infinity`` as floats, and a number past about ``1.8e308`` (``1e400``, or 400 digits and a
fraction) as ``inf``, without a word. A route that then counts with it fails deep inside
(``int(inf)`` is an ``OverflowError``: LibreTranslate's ``"alternatives": 1e400`` was a 500).
:func:`bad_json_number` finds such a number and where it is, so that the door
(:class:`api.input_check.InputCheck`) refuses the body with a 400 naming it, on every route at once.

Most bodies cannot hold one: no value that starts with one of the literals, with an exponent of three
digits or more or with a run of 200 digits means no number outside a float's range, and such a body is
passed after one regular expression search. Only a body that might hold one is parsed (on the event loop,
as the NUL check's parse is: both are bounded by the body size limit).
"""

from __future__ import annotations

import json
import math
import re

# Where a value starts (the body's start, or after a colon, bracket or comma), what a non-finite number needs: a
# literal, an exponent of 3+ significant digits, or (an exponent of at most 99 making up the rest of the 309
# orders of magnitude) at least 210 digits in a row; 200 leave room. Text that merely reads "Infinity" or holds
# an id like "b37e-0205" is not a value's start: such a body is not parsed for it.
_SUSPECT = re.compile(
    rb"(?:^|[:\[,])[ \t\r\n]*-?(?:NaN|Infinity|[0-9]+(?:\.[0-9]+)?[eE][+-]?0*[1-9][0-9]{2}|[0-9]{200})"
)


class _Bad:
    """A number no float holds, as it was written: what the parse puts where it was found."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(text)


def bad_json_number(body: bytes) -> tuple[str, str] | None:
    """The first number in the JSON text ``body`` that no float holds, as written, and where it is
    (``("1e400", "alternatives")``, ``("NaN", "items[2].score")``, ``("Infinity", "the body")``); ``None``
    if there is none, or if ``body`` is not JSON (its parser answers that itself).
    """
    if _SUSPECT.search(body) is None:
        return None
    try:
        value = json.loads(body, parse_constant=_Bad, parse_float=_float)
    except (ValueError, RecursionError):
        return None
    pending: list[tuple[object, str]] = [(value, "")]
    while pending:  # a stack, not recursion: the depth is the sender's
        item, where = pending.pop()
        if isinstance(item, _Bad):
            return item.text, where or "the body"
        if isinstance(item, dict):
            pending.extend((child, f"{where}.{key}" if where else str(key)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            pending.extend((child, f"{where}[{index}]") for index, child in reversed(list(enumerate(item))))
    return None
