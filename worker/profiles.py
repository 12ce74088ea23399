"""Prompt profiles: how a job becomes a prompt, and how the model's output becomes a translation.

A profile is chosen per model: ``few-shot`` for base models (the default Gemma 3 270M), ``chat``
for instruct models with a chat template, ``identity`` for the deterministic test engine.
Adding one (say, for a dedicated translation model) means one class and one line in
:data:`PROFILES`.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from contract.errors import ConfigurationError
from contract.languages import language_name
from contract.schemas import JobSpec
from worker.engine import Tokenizer

# Three short sentences in the languages the few-shot profile has examples for. For a pair
# where either side is missing, the profile falls back to an instruction without examples.
FEW_SHOT_EXAMPLES: dict[str, tuple[str, str, str]] = {
    "en": ("The weather is nice today.", "Where is the train station?", "I would like a cup of coffee, please."),
    "fr": ("Il fait beau aujourd'hui.", "Où est la gare ?", "Je voudrais une tasse de café, s'il vous plaît."),
    "de": ("Das Wetter ist heute schön.", "Wo ist der Bahnhof?", "Ich hätte gern eine Tasse Kaffee, bitte."),
    "es": ("Hoy hace buen tiempo.", "¿Dónde está la estación de tren?", "Quisiera una taza de café, por favor."),
    "it": ("Oggi il tempo è bello.", "Dov'è la stazione ferroviaria?", "Vorrei una tazza di caffè, per favore."),
    "pt": ("O tempo está bom hoje.", "Onde fica a estação de trem?", "Eu gostaria de uma xícara de café, por favor."),
    "nl": ("Het weer is mooi vandaag.", "Waar is het treinstation?", "Ik wil graag een kopje koffie, alstublieft."),
    "ja": ("今日はいい天気です。", "駅はどこですか？", "コーヒーを一杯お願いします。"),
    "zh": ("今天天气很好。", "火车站在哪里？", "请给我一杯咖啡。"),
    "ko": ("오늘은 날씨가 좋네요.", "기차역이 어디에 있어요?", "커피 한 잔 주세요."),
}

PROFILE_FILE = "dragoman.json"


class PromptProfile(ABC):
    """Turns a job into prompt tokens and the generated text into the translation."""

    name: ClassVar[str]
    piece_unit: ClassVar[Literal["text", "line", "sentence"]] = "text"
    """The largest unit the model is given in one request (the translator keeps the breaks between units).

    ``text``: a whole text if it fits, else paragraphs packed into pieces that fit. ``line``: every
    line on its own. ``sentence``: every sentence of every line on its own, for a model that answers
    one line and was shown one-sentence examples (few-shot on a base model): a multi-paragraph text
    keeps its paragraphs instead of being flattened into one line, and a long line does not run
    on past its budget.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    @abstractmethod
    def build_prompt(self, spec: JobSpec) -> str:
        """The prompt text for ``spec``."""

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The prompt's token ids, with the model's BOS token first when it has one."""
        ids = self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)
        bos = self.tokenizer.bos_token_id
        return ids if bos is None else [bos, *ids]

    def stop_token_ids(self) -> Sequence[int]:
        """Tokens that end generation besides the model's end-of-sequence token."""
        return ()

    def postprocess(self, generated: str) -> str:
        """The translation contained in the generated text."""
        return generated.strip()


class FewShotProfile(PromptProfile):
    """For base models: three example pairs, then the source line; stop at the end of the line.

    The model answers one line and has seen one-sentence examples, so the translator sends it
    one sentence at a time (``piece_unit``) and puts the translations back between the source's
    own spaces and line breaks. (Whole 150-word lines made Gemma 3 270M run on past twice its
    budget; one sentence at a time it stops at the end of the line.)
    """

    name = "few-shot"
    piece_unit = "sentence"

    def build_prompt(self, spec: JobSpec) -> str:
        """``Source: example / Target: example`` three times, then ``Source: text / Target:``."""
        source, target = language_name(spec.source_lang), language_name(spec.target_lang)
        text = " ".join(spec.text.split())  # one line (the translator sends lines one by one)
        src_examples = FEW_SHOT_EXAMPLES.get(_base(spec.source_lang))
        tgt_examples = FEW_SHOT_EXAMPLES.get(_base(spec.target_lang))
        if src_examples is None or tgt_examples is None or src_examples is tgt_examples:
            header = f"Translate from {source} to {target}.\n\n"
        else:
            header = "".join(
                f"{source}: {src}\n{target}: {tgt}\n\n" for src, tgt in zip(src_examples, tgt_examples, strict=True)
            )
        return f"{header}{source}: {text}\n{target}:"

    def stop_token_ids(self) -> Sequence[int]:
        """Every vocabulary entry that contains a line break."""
        return newline_token_ids(self.tokenizer)

    def postprocess(self, generated: str) -> str:
        """The first line of the output, trimmed."""
        return generated.split("\n", 1)[0].strip()


class ChatProfile(PromptProfile):
    """For instruct models: one user message through the tokenizer's chat template."""

    name = "chat"

    def build_prompt(self, spec: JobSpec) -> str:
        """The chat template applied to a translation instruction and the text."""
        source, target = language_name(spec.source_lang), language_name(spec.target_lang)
        message = (
            f"Translate the following text from {source} to {target}. Reply with the translation only.\n\n{spec.text}"
        )
        template: Any = self.tokenizer
        return str(
            template.apply_chat_template(
                [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
            )
        )

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The templated prompt's ids (the template already carries any BOS token)."""
        return self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)


class IdentityProfile(PromptProfile):
    """The prompt is the text and the output is kept byte for byte (for the test engine)."""

    name = "identity"

    def build_prompt(self, spec: JobSpec) -> str:
        """The source text itself."""
        return spec.text

    def postprocess(self, generated: str) -> str:
        """Unchanged."""
        return generated


PROFILES: dict[str, type[PromptProfile]] = {
    profile.name: profile for profile in (FewShotProfile, ChatProfile, IdentityProfile)
}


def choose_profile(name: str | None, model_path: Path | None, tokenizer: Tokenizer) -> PromptProfile:
    """The profile to use: the one named, else the model folder's ``dragoman.json``, else
    ``chat`` when the tokenizer has a chat template, else ``few-shot``."""
    if name is None and model_path is not None and (model_path / PROFILE_FILE).is_file():
        name = json.loads((model_path / PROFILE_FILE).read_text()).get("profile")
    if name is None:
        name = "chat" if getattr(tokenizer, "chat_template", None) else "few-shot"
    try:
        return PROFILES[name](tokenizer)
    except KeyError:
        raise ConfigurationError(
            f"unknown prompt profile {name!r}; choose one of {', '.join(sorted(PROFILES))}"
        ) from None


def newline_token_ids(tokenizer: Tokenizer) -> list[int]:
    """Ids of every token whose text contains a line break.

    SentencePiece vocabularies spell it ``\n`` (or the byte token ``<0x0A>``); byte-level BPE
    spells it ``Ċ``, which in a SentencePiece vocabulary is a Maltese letter, not a newline.
    """
    vocab: dict[str, int] = getattr(tokenizer, "get_vocab")()  # noqa: B009
    markers = ("\n", "<0x0A>") if ("\n" in vocab or "<0x0A>" in vocab) else ("Ċ",)
    return sorted(i for token, i in vocab.items() if any(m in token for m in markers))


def _base(code: str) -> str:
    return re.split(r"[-_]", code, maxsplit=1)[0].lower()
