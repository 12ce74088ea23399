"""A JSON text's depth and values, read without recursion: exact depth on JSON, never lower than a parser goes."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from contract.json_shape import (
    MAX_JSON_DEPTH,
    SLICE_BYTES,
    JsonTooDeepError,
    JsonTooManyValuesError,
    check_json_shape,
    json_shape,
)


def json_depth(text: str | bytes) -> int:
    """The depth :func:`json_shape` reads, the whole text."""
    return json_shape(text).depth


def recursive_depth(value: Any) -> int:
    """The depth the plain way (recursion): what :func:`json_depth` must agree with on JSON."""
    if isinstance(value, list):
        return 1 + max((recursive_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((recursive_depth(item) for item in value.values()), default=0)
    return 0


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"a"', 0),
        ("[]", 1),
        ('{"a": 1}', 1),
        ("[[]]", 2),
        ('[[], {"a": {"b": []}}]', 4),
        ('"[[[{{{"', 0),  # brackets in a string are text
        (r'["\"[[[", "\\", "\\\"[", 1]', 1),  # escaped quotes and backslashes end no string
        (r'{"\\": [{"\"]": [1]}]}', 4),
        ('["ü[", {"日本": [["é"]]}]', 4),  # bytes beyond ASCII are never a bracket or a quote
    ],
)
def test_the_depth_of_json(text: str, depth: int) -> None:
    """Exact on these, as text and as UTF-8 bytes."""
    assert json_depth(text) == depth
    assert json_depth(text.encode()) == depth
    assert recursive_depth(json.loads(text)) == depth


def random_value(rng: random.Random, levels: int) -> Any:
    """A JSON value up to ``levels`` deep, whose strings hold brackets, quotes and backslashes."""
    strings = ["[", "{", '"', "\\", '\\"[', "]}", "x", "日本["]
    if levels == 0 or rng.random() < 0.2:
        return rng.choice([1, 2.5, None, True, *strings])
    if rng.random() < 0.5:
        return [random_value(rng, levels - 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(strings): random_value(rng, levels - 1) for _ in range(rng.randint(0, 3))}


def test_it_agrees_with_the_recursive_depth_on_random_json() -> None:
    """Five thousand random documents, escaped both ways ``json.dumps`` writes them."""
    rng = random.Random(48)
    for _ in range(5_000):
        value = random_value(rng, rng.randint(0, 8))
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
        assert json_depth(text) == recursive_depth(value), text


def test_on_broken_json_it_never_reads_less_deep_than_a_parser_goes() -> None:
    """Up to the first error the passes read as the parser does: an unterminated string hides nothing."""
    assert json_depth('["abc') == 1  # the parser stops in the string
    assert json_depth("[[[[") == 4
    assert json_depth('[[1, "x"]], [[[') >= 3


def test_a_text_100000_deep_is_refused_with_its_depth() -> None:
    """100,000 ``[`` (the body that was a RecursionError): refused, saying how deep it is and the limit."""
    text = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(JsonTooDeepError) as refused:
        check_json_shape(text)
    assert refused.value.depth == 100_000
    assert "100,000 levels" in str(refused.value) and str(MAX_JSON_DEPTH) in str(refused.value)


def test_the_limit_itself_passes_and_one_more_does_not() -> None:
    """``MAX_JSON_DEPTH`` levels are read; one more is refused (however many brackets sit side by side)."""
    check_json_shape("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    check_json_shape("[" + "[]," * 10_000 + "[]]")  # wide, not deep
    with pytest.raises(JsonTooDeepError):
        check_json_shape("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))


def test_slices_cut_strings_escapes_and_runs_of_brackets_anywhere() -> None:
    """Texts longer than a slice, whose strings, backslash runs and escaped quotes straddle slice ends."""
    rng = random.Random(7)
    for _ in range(40):
        values = [random_value(rng, rng.randint(0, 6)) for _ in range(rng.randint(1, 400))]
        filler = "\\" * rng.randint(0, 3) + '\\"' * rng.randint(0, 2) + "x" * rng.randint(1, 9)
        value = {"pad": filler * (SLICE_BYTES // len(filler) + rng.randint(0, 5_000)), "items": values}
        text = json.dumps(value)
        assert len(text.encode()) > SLICE_BYTES
        assert json_depth(text) == recursive_depth(value), text[:200]
    for offset in range(-3, 4):  # a bracket run and a string starting around a slice's end
        head = "x" * (SLICE_BYTES - 10 + offset)
        value = [head, '[[\\"]]', [[[["deep"]]]]]
        assert json_depth(json.dumps(value)) == 5


def count_values(value: Any) -> int:
    """Every array item, object key and value, and the value itself."""
    if isinstance(value, list):
        return 1 + sum(count_values(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(1 + count_values(item) for item in value.values())
    return 1


def test_the_values_are_counted_as_a_parser_would_make_them() -> None:
    """Exact where no array or object is empty (an empty one counts two), strings' commas and colons not counted."""
    for value in ([1, 2, 3], {"a": [1, {"b": "c,d:e"}]}, "x,y", [[1], [2, [3]]]):
        assert json_shape(json.dumps(value)).values == count_values(value)
    assert json_shape("[]").values == 2


def test_too_many_values_are_refused_and_a_long_string_is_one() -> None:
    """Three million ``{}`` are far past the limit; ten million characters of one string are a single value."""
    with pytest.raises(JsonTooManyValuesError) as refused:
        check_json_shape(b"[" + b"{}," * 3_000_000 + b"{}]")
    assert refused.value.values > refused.value.limit
    check_json_shape(json.dumps("a,b:[" * 2_000_000))
    check_json_shape(b"[" + b"1," * 100_000 + b"1]", max_values=None)  # no limit asked: only the depth
