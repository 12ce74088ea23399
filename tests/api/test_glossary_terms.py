"""A glossary's terms found in a text: the same answer as a search per term, for a few terms or ten thousand."""

from __future__ import annotations

import random
import unicodedata

import pytest

from api.glossary_terms import TermFinder
from contract.controls import MAX_GLOSSARY_TERMS


def searched(entries: list[tuple[str, str]], text: str) -> dict[str, str]:
    """What a search per term finds (the definition the finder must meet), capped as a job carries them."""
    folded = unicodedata.normalize("NFC", text).casefold()
    found = [(s, t) for s, t in entries if unicodedata.normalize("NFC", s).casefold() in folded]
    if len(found) > MAX_GLOSSARY_TERMS:
        found = sorted(found, key=lambda entry: -len(entry[0]))[:MAX_GLOSSARY_TERMS]
    return dict(found)


@pytest.mark.parametrize(
    ("size", "longest"),
    [(5, 5), (100, 5), (400, 5), (3_000, 5), (400, 40)],
    ids=["5-terms", "100-terms", "400-terms", "3000-terms", "400-long-terms"],
)
def test_the_finder_finds_what_a_search_per_term_finds(size: int, longest: int) -> None:
    """Property, over random glossaries and texts: equal answers, in the glossary's order (both ways of finding;
    terms longer than the automaton reads, whose beginnings occur in texts that hold them or not)."""
    rng = random.Random(size + longest)
    alphabet = "abcAB ßSé\u0065\u0301" if longest < 10 else "ab"  # ß folds to "ss"; "e" + combining acute: "é"
    for _ in range(60):
        sources = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest))).strip() for _ in range(size)}
        entries = [(source, source.upper()) for source in sorted(sources - {""}, key=lambda _: rng.random())]
        finder = TermFinder(entries)
        for _ in range(10):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
            if longest >= 10:
                text += rng.choice(entries)[0][: rng.randint(10, longest)]  # a long term's beginning, or all of it
            found = finder.terms_in(text)
            assert found == searched(entries, text)
            assert list(found) == list(searched(entries, text))


def test_terms_inside_one_another_are_all_found() -> None:
    entries = [(term, term.upper()) for term in ("he", "she", "his", "hers", "s", "ushers x")] + [
        (f"filler{n}", "x") for n in range(300)
    ]
    assert set(TermFinder(entries).terms_in("USHERS")) == {"he", "she", "hers", "s"}


def test_every_term_is_the_longest_past_the_per_job_limit() -> None:
    entries = [(f"t{n}" + "x" * (n % 5), str(n)) for n in range(MAX_GLOSSARY_TERMS + 20)]
    every = TermFinder(entries).every_term()
    assert len(every) == MAX_GLOSSARY_TERMS
    assert min(map(len, every)) >= max(len(s) for s, _ in entries if s not in every)
