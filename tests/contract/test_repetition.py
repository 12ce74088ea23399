"""The loop detector the runaway control and the ``repetition`` flag share."""

from __future__ import annotations

from contract.repetition import repeating_tail


def test_a_word_repeated_to_the_end_is_a_loop_and_its_span_is_the_word() -> None:
    words = ["le", "chat", "dort", *(["la"] * 30)]
    found = repeating_tail(words)
    assert found is not None
    assert (found.start, found.period, found.repeats) == (3, 1, 30)
    assert list(found.span(words)) == ["la"]


def test_a_clause_repeated_is_found_with_its_shortest_period() -> None:
    tokens = [1, 2, 3] + [7, 8, 9, 10, 11, 12] * 6
    found = repeating_tail(tokens)
    assert found is not None
    assert found.period == 6
    assert found.start == 3


def test_ordinary_text_and_short_repeats_are_not_loops() -> None:
    assert repeating_tail("the cat sat on the mat and the dog sat on the rug".split()) is None
    assert repeating_tail(["ha", "ha", "ha", "ha"]) is None  # four repeats, but too short to count
    assert repeating_tail([]) is None


def test_the_thresholds_are_the_callers() -> None:
    assert repeating_tail(list("abababab"), min_length=8) is not None
    assert repeating_tail(list("abababab"), min_length=9) is None
    assert repeating_tail(list("abababab"), min_length=4, min_repeats=5) is None
