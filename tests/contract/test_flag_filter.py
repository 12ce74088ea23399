"""The "flagged" filter: every line, any flag, or chosen flags; an unknown name says which exist."""

from __future__ import annotations

import pytest

from contract.flag_filter import ANY_FLAG, filter_names, parse_flag_filter
from contract.quality import QualityFlag, UnknownQualityFlagError


@pytest.mark.parametrize("value", [None, False, "false", "0", "no", ""])
def test_no_filter(value: str | bool | None) -> None:
    assert parse_flag_filter(value) is None
    assert filter_names(parse_flag_filter(value)) is None


@pytest.mark.parametrize("value", [True, "true", "True", "1", "yes", "any"])
def test_any_flag(value: str | bool) -> None:
    assert parse_flag_filter(value) == ANY_FLAG
    assert filter_names(ANY_FLAG) == []


def test_chosen_flags_from_a_comma_list_or_a_list() -> None:
    chosen = parse_flag_filter("wrong_language, numbers")
    assert chosen == {QualityFlag.WRONG_LANGUAGE, QualityFlag.NUMBERS}
    assert filter_names(chosen) == ["numbers", "wrong_language"]
    assert parse_flag_filter(["tags"]) == {QualityFlag.TAGS}


@pytest.mark.parametrize("value", ["maybe", "numbers,nonsense", ",,"])
def test_an_unknown_name_lists_the_flags(value: str) -> None:
    with pytest.raises(UnknownQualityFlagError, match="wrong_language"):
        parse_flag_filter(value)
