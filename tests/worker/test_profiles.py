"""Prompt profiles, with the exact prompts they build."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contract.errors import ConfigurationError
from contract.schemas import JobSpec
from worker.deterministic_engine import CharTokenizer
from worker.profiles import (
    ChatProfile,
    FewShotProfile,
    IdentityProfile,
    choose_profile,
    newline_token_ids,
)


def _spec(text: str, source: str = "en", target: str = "fr") -> JobSpec:
    return JobSpec(
        job_id="00000000-0000-0000-0000-000000000000", text=text, source_lang=source, target_lang=target, created_at=0.0
    )


class FakeTokenizer(CharTokenizer):
    """A character tokenizer with a vocabulary, a BOS token and (optionally) a chat template."""

    bos_token_id = 2

    def __init__(self, vocab: dict[str, int] | None = None, chat_template: str | None = None) -> None:
        self._vocab = vocab or {}
        self.chat_template = chat_template

    def get_vocab(self) -> dict[str, int]:
        return self._vocab

    def apply_chat_template(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> str:
        assert kwargs == {"tokenize": False, "add_generation_prompt": True}
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages) + "<assistant>"


def test_few_shot_prompt_for_a_pair_with_examples() -> None:
    prompt = FewShotProfile(FakeTokenizer()).build_prompt(_spec("The cat\nsleeps.", "en", "fr"))
    assert prompt == (
        "English: The weather is nice today.\nFrench: Il fait beau aujourd'hui.\n\n"
        "English: Where is the train station?\nFrench: Où est la gare ?\n\n"
        "English: I would like a cup of coffee, please.\n"
        "French: Je voudrais une tasse de café, s'il vous plaît.\n\n"
        "English: The cat sleeps.\nFrench:"
    )


def test_few_shot_uses_the_base_language_examples_and_full_names() -> None:
    prompt = FewShotProfile(FakeTokenizer()).build_prompt(_spec("Olá", "pt-BR", "de"))
    assert prompt.startswith("Portuguese (Brazil): O tempo está bom hoje.\nGerman: Das Wetter ist heute schön.\n\n")
    assert prompt.endswith("Portuguese (Brazil): Olá\nGerman:")


def test_few_shot_without_examples_falls_back_to_an_instruction() -> None:
    prompt = FewShotProfile(FakeTokenizer()).build_prompt(_spec("Hello", "en", "sw"))
    assert prompt == "Translate from English to Swahili.\n\nEnglish: Hello\nSwahili:"


def test_few_shot_tokens_start_with_bos_and_stop_at_line_ends() -> None:
    tokenizer = FakeTokenizer(vocab={"\n": 107, "\n\n": 108, "a": 5, "Ċ": 9, ".\n": 300})
    profile = FewShotProfile(tokenizer)
    ids = profile.prompt_token_ids(_spec("Hi", "en", "sw"))
    assert ids[0] == 2 and ids[1:] == tokenizer.encode(profile.build_prompt(_spec("Hi", "en", "sw")))
    assert list(profile.stop_token_ids()) == [107, 108, 300]  # "Ċ" is a letter in this vocabulary
    assert profile.postprocess(" Bonjour le monde.\nEnglish: next") == "Bonjour le monde."


def test_newline_tokens_of_a_byte_level_vocabulary() -> None:
    assert newline_token_ids(FakeTokenizer(vocab={"Ċ": 198, "ĊĊ": 271, "a": 64})) == [198, 271]


def test_chat_prompt_uses_the_template() -> None:
    profile = ChatProfile(FakeTokenizer(chat_template="{{ messages }}"))
    assert profile.build_prompt(_spec("Good night", "en", "ja")) == (
        "<user>Translate the following text from English to Japanese. Reply with the translation only."
        "\n\nGood night</user><assistant>"
    )
    assert profile.prompt_token_ids(_spec("x"))[0] != 2  # the template carries its own BOS
    assert profile.postprocess("  おやすみなさい \n") == "おやすみなさい"


def test_identity_keeps_text_byte_for_byte() -> None:
    profile = IdentityProfile(CharTokenizer())
    assert profile.build_prompt(_spec("  a\n\tb  ")) == "  a\n\tb  "
    assert profile.postprocess("  a\n\tb  ") == "  a\n\tb  "


def test_profile_choice(tmp_path: Path) -> None:
    assert choose_profile(None, None, FakeTokenizer()).name == "few-shot"
    assert choose_profile(None, None, FakeTokenizer(chat_template="x")).name == "chat"
    translategemma = FakeTokenizer(chat_template="{{ messages[0].content[0].source_lang_code }}")
    assert choose_profile(None, None, translategemma).name == "translategemma"
    assert choose_profile("chat", None, translategemma).name == "chat"  # a name still wins
    assert choose_profile("identity", None, FakeTokenizer()).name == "identity"
    (tmp_path / "dragoman.json").write_text(json.dumps({"profile": "few-shot"}))
    assert choose_profile(None, tmp_path, FakeTokenizer(chat_template="x")).name == "few-shot"
    with pytest.raises(ConfigurationError, match="unknown prompt profile 'nope'"):
        choose_profile("nope", None, FakeTokenizer())
