"""The quality flags' names, as settings and filters parse them."""

from __future__ import annotations

import pytest

from contract.errors import ConfigurationError
from contract.quality import QualityFlag, UnknownQualityFlagError, parse_flags


def test_names_parse_to_flags_blanks_skipped() -> None:
    assert parse_flags(["numbers", " wrong_language ", ""]) == {QualityFlag.NUMBERS, QualityFlag.WRONG_LANGUAGE}


def test_an_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownQualityFlagError, match=r"numbrs.*wrong_language, untranslated"):
        parse_flags(["numbrs"])


def test_an_unknown_name_in_a_setting_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="DRAGOMAN_RETRY_ON_FLAGS: unknown quality flag 'x'"):
        parse_flags(["x"], setting="DRAGOMAN_RETRY_ON_FLAGS")
