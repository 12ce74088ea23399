"""bench.doors: the same sentences through the native, DeepL and LibreTranslate doors, at a tiny size."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.doors import DOORS, parse_args, rotations, run, sentences
from contract.services import ServiceUrls


def test_the_sentences_are_the_same_for_a_seed_and_drawn_from_the_words_file() -> None:
    drawn = sentences(200)
    assert drawn == sentences(200) and drawn != sentences(200, seed=1)
    assert len(set(drawn)) == 200
    assert all(4 <= len(sentence.split()) <= 24 and sentence.endswith(".") for sentence in drawn)


def test_each_door_goes_first_in_turn() -> None:
    orders = rotations(DOORS)
    assert [order[0] for order in orders] == list(DOORS)
    assert all(sorted(order) == sorted(DOORS) for order in orders)


def test_an_unknown_door_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--doors", "deepl,native"]).doors == ("deepl", "native")
    assert parse_args([]).doors == DOORS
    with pytest.raises(SystemExit):
        parse_args(["--doors", "google"])
    assert "unknown door(s) ['google']" in capsys.readouterr().err


def test_a_tiny_run_of_every_door_answers_every_sentence_and_compares_them(
    service_urls: ServiceUrls, tmp_path: Path
) -> None:
    """A real ``dragoman api`` and a zero-cost worker: every door's answers are checked against the
    sentences (the engine echoes them), and the ratios are against the native door."""
    args = parse_args(["--sentences", "24", "--per-request", "5", "--clients", "2", "--rounds", "2"])
    result = run(service_urls, args, tmp_path)
    assert [r["order"][0] for r in result["rounds"]] == list(DOORS[:2])
    for door in DOORS:
        figures = result["doors"][door]
        assert figures["translate_requests"] == 5 and figures["jobs_per_s"] > 0
    one_each = ("deepl", "libretranslate", "native-submit")
    assert [result["doors"][door]["http_requests"] for door in one_each] == [5, 5, 5]
    assert result["doors"]["native"]["http_requests"] >= 5 + 24  # the lists, then each job read
    assert set(result["ratios"]) == {
        "deepl_vs_native",
        "libretranslate_vs_native",
        "deepl_vs_native-submit",
        "libretranslate_vs_native-submit",
    }
