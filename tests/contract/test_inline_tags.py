"""The placeholder-tag grammar the orchestrator writes and the worker checks."""

from __future__ import annotations

import pytest

from contract.inline_tags import Tag, has_tags, strip_tags, tag_problem, tokens


def test_tokens_split_text_and_tags() -> None:
    assert tokens("Click <x1>here</x1> or <x2/>.") == [
        "Click ",
        Tag("open", 1),
        "here",
        Tag("close", 1),
        " or ",
        Tag("unit", 2),
        ".",
    ]
    assert tokens("a </x1/> b") == ["a </x1/> b"]  # no tag
    assert not has_tags("x < 1 and <b>")
    assert strip_tags("Click <x1>here</x1><x2/>.") == "Click here."


@pytest.mark.parametrize(
    "translation",
    [
        "Cliquez <x1>ici</x1> ou <x2/>.",
        "<x2/> ou cliquez <x1>ici</x1>.",  # moved: languages order words differently
    ],
)
def test_a_translation_that_keeps_every_tag_passes(translation: str) -> None:
    assert tag_problem("Click <x1>here</x1> or <x2/>.", translation) is None


@pytest.mark.parametrize(
    ("translation", "problem"),
    [
        ("Cliquez ici ou <x2/>.", "missing <x1>, </x1>"),
        ("Cliquez <x1>ici</x1> ou <x2/><x2/>.", "repeated <x2/> (2×)"),
        ("Cliquez <x1>ici</x1> ou <x2/> <x3/>.", "unexpected <x3/>"),
        ("Cliquez </x1>ici<x1> ou <x2/>.", "out of order"),
        ("<x1>Cliquez <x2/> ici.", "missing </x1>"),
    ],
)
def test_a_translation_that_damages_the_tags_is_named(translation: str, problem: str) -> None:
    found = tag_problem("Click <x1>here</x1> or <x2/>.", translation)
    assert found is not None and problem in found


def test_nesting_must_stay_proper() -> None:
    source = "<x1>Bold <x2>and italic</x2></x1> text."
    assert tag_problem(source, "<x1>Gras <x2>et italique</x2></x1> texte.") is None
    assert tag_problem(source, "<x1>Gras <x2>et italique</x1></x2> texte.") is not None
