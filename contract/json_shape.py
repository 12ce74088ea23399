"""How deep a JSON text nests and how many values it holds, read in linear time without recursion, before any parser.

Python's ``json`` and msgspec parse a nested array or object by recursing, one C stack frame per
level: a body of 100,000 ``[`` is a ``RecursionError`` deep in the parser (a 500 with a long
traceback, if nothing catches it). And a parser is one C call, which keeps Python's interpreter
lock from start to end, on whatever thread it runs: three million ``{}`` (9 MB) are a quarter of a
second of it, during which no other thread, the event loop's included, runs a line. So both are
measured first, and a text past either limit is never parsed:

- its depth, against :data:`MAX_JSON_DEPTH`: no request dragoman reads nests more than a few levels
  (a job's ``metadata`` is the deepest, any JSON object, itself held to 32 by the job's rules);
- its values (every array item, object key and value, the top value too) against ``max_values``:
  what a parse costs grows with them, not with the bytes (a 10 MB string is parsed at the speed of
  a copy), so the count bounds the one long call a parse is (:data:`MAX_JSON_VALUES` for a request
  body).

:func:`json_shape` reads the text a slice of :data:`SLICE_BYTES` at a time, each slice in a few C
passes (a few milliseconds: the interpreter lock changes hands between slices), never a Python
loop per byte and never a recursion: escaped backslashes and quotes are dropped (``\\\\`` pairs first,
left to right, as a parser reads them, so what is left of a string has no quote in it), then every
string (what lies between a quote and the next, whose brackets and commas are text), then every byte
but the structural ones (``[ ] { } , :``). The depth is the largest running sum of the brackets
(``[`` and ``{`` one up, ``]`` and ``}`` one down); the values are about the commas, colons and
opening brackets, plus one (an empty array or object counts two). A backslash or a string cut by a
slice's end carries over to the next slice.

On invalid JSON the depth may come out higher than what a parser would read (it stops at the first
error), never lower: up to the first error the passes read the text as the parser does, so a text
the check lets through can never take a parser deeper than the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from contract.errors import DragomanError

MAX_JSON_DEPTH = 64
"""The deepest nesting (arrays and objects inside each other) any JSON dragoman reads may have."""

MAX_JSON_VALUES = 500_000
"""The most values (array items, object keys and values) one request body may hold: far more than a
request within the API's limits needs (1,000 jobs with 200-term glossaries are about 400,000), few
enough to parse in a fraction of a second."""

SLICE_BYTES = 256 * 1024
"""How much of a text one round of passes reads: each pass over it is a few milliseconds."""

_STRUCTURE = b"[]{},:"
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in _STRUCTURE)
_STEP = [0] * 256
for _open in b"[{":
    _STEP[_open] = 1
for _close in b"]}":
    _STEP[_close] = -1


class JsonShapeError(DragomanError, ValueError):
    """A JSON text past a limit on its shape, refused before it is parsed."""


class JsonTooDeepError(JsonShapeError):
    """A JSON text nests deeper than its limit (:data:`MAX_JSON_DEPTH`)."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(
            f"the JSON nests {depth:,} levels deep (arrays and objects inside each other); at most {limit} are "
            "read: send a flatter document"
        )
        self.depth = depth
        self.limit = limit


class JsonTooManyValuesError(JsonShapeError):
    """A JSON text holds more values than its limit (:data:`MAX_JSON_VALUES` for a request body)."""

    def __init__(self, values: int, limit: int) -> None:
        super().__init__(
            f"the JSON holds {values:,} values (array items, object keys and values) or more; at most {limit:,} "
            "are read in one request: send fewer items, or split the request"
        )
        self.values = values
        self.limit = limit


@dataclass(frozen=True, slots=True)
class JsonShape:
    """A JSON text's depth and number of values, as far as :func:`json_shape` read (see its ``stop_*`` arguments)."""

    depth: int
    values: int


def json_shape(text: bytes | str, *, stop_depth: int | None = None, stop_values: int | None = None) -> JsonShape:
    """``text``'s depth (0 for a scalar, 1 for ``[]`` or ``{"a": 1}``, 2 for ``[[]]``) and number of values.

    Linear in the text's length (see the module's docstring), whatever the text holds. Reading stops
    at the end of the first slice where the depth passes ``stop_depth`` or the values ``stop_values``:
    the shape answered is then what was read so far, past the limit already.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    level = deepest = 0
    values = 1
    escaped = in_string = False  # the next slice's first byte is escaped / in a string
    for start in range(0, len(data), SLICE_BYTES):
        piece = data[start : start + SLICE_BYTES]
        if escaped:
            piece = piece[1:]  # the byte a backslash at the end of the last slice escaped: string text
        escaped = False
        if b"\\" in piece:
            trailing = len(piece) - len(piece.rstrip(b"\\"))
            if trailing % 2:  # an unpaired backslash at the end escapes the next slice's first byte
                piece, escaped = piece[:-1], True
            piece = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
        if in_string or b'"' in piece:
            parts = piece.split(b'"')
            outside = parts[1::2] if in_string else parts[0::2]
            in_string ^= len(parts) % 2 == 0  # an odd number of quotes flips it
            piece = b"".join(outside)
        structure = piece.translate(None, _NOT_STRUCTURE)
        if not structure:
            continue
        opens = structure.count(b"[") + structure.count(b"{")
        separators = structure.count(b",") + structure.count(b":")
        values += separators + opens
        if level + opens > deepest:  # only then can this slice go deeper than before
            brackets = structure.translate(None, b",:")
            deepest = max(deepest, max(accumulate(map(_STEP.__getitem__, brackets), initial=level)))
        level += opens - (len(structure) - opens - separators)  # the closing brackets are the rest
        if (stop_depth is not None and deepest > stop_depth) or (stop_values is not None and values > stop_values):
            break
    return JsonShape(depth=deepest, values=values)


def check_json_shape(
    text: bytes | str, *, max_depth: int = MAX_JSON_DEPTH, max_values: int | None = MAX_JSON_VALUES
) -> None:
    """Raise :class:`JsonTooDeepError` or :class:`JsonTooManyValuesError` if ``text`` is past a limit
    (``max_values=None``: no limit on the values; a line of a run file is held by its length).

    A text with no more opening brackets than ``max_depth``, and no more commas, colons and brackets than
    ``max_values``, cannot be past either: counted at the speed of a byte search, and only another is read.
    """
    if isinstance(text, str):
        opens = text.count("[") + text.count("{")
        separators = text.count(",") + text.count(":")
    else:
        opens = text.count(b"[") + text.count(b"{")
        separators = text.count(b",") + text.count(b":")
    if opens <= max_depth and (max_values is None or opens + separators < max_values):
        return
    shape = json_shape(text, stop_depth=max_depth, stop_values=max_values)
    if shape.depth > max_depth:
        raise JsonTooDeepError(shape.depth, max_depth)
    if max_values is not None and shape.values > max_values:
        raise JsonTooManyValuesError(shape.values, max_values)
