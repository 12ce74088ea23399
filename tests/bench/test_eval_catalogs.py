"""The one-shot profile file the eval benchmark compares with few-shot: what it sends the base model."""

from __future__ import annotations

from pathlib import Path

from bench.eval_catalogs import compared_profile
from contract.schemas import JobSpec
from worker.deterministic_engine import CharTokenizer
from worker.profiles import choose_profile

ONE_SHOT = Path(__file__).parents[2] / "bench" / "samples" / "one-shot-completion.json"


def _spec(text: str, source: str, target: str) -> JobSpec:
    return JobSpec(
        job_id="00000000-0000-0000-0000-000000000000", text=text, source_lang=source, target_lang=target, created_at=0.0
    )


def test_the_one_shot_profile_is_one_example_then_the_source_line() -> None:
    profile = choose_profile(None, None, CharTokenizer(), profile_file=ONE_SHOT)
    assert (profile.name, profile.piece_unit, profile.stop_strings) == ("one-shot", "sentence", ("\n",))
    assert profile.build_prompt(_spec("Package files:", "en", "fr")) == (
        "English: Save the file before you quit.\n"
        "French: Enregistrez le fichier avant de quitter.\n\n"
        "English: Package files:\nFrench:"
    )


def test_without_an_example_for_the_pair_the_prompt_is_zero_shot() -> None:
    profile = choose_profile(None, None, CharTokenizer(), profile_file=ONE_SHOT)
    assert profile.build_prompt(_spec("Hallo", "de", "ja")) == "German: Hallo\nJapanese:"


def test_a_profile_file_is_served_under_its_profile_name() -> None:
    assert compared_profile("seed-x", None) == ("seed-x", ["--profile", "seed-x"])
    assert compared_profile("seed-x", ONE_SHOT) == ("one-shot", ["--profile-file", str(ONE_SHOT)])
