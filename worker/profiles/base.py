"""What every prompt profile is: prompt in, translation out, the controls it honours, its sampling."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from contract.controls import Control, Formality
from contract.errors import UnrunnableJobError, UnsupportedControlError
from contract.inline_tags import has_tags
from contract.languages import language_name
from contract.schemas import JobSpec
from worker.engine import Tokenizer

PieceUnit = Literal["text", "line", "sentence"]


class Sampling(msgspec.Struct, frozen=True):
    """How the engine samples for a profile: greedy unless the model card recommends otherwise."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    repetition_penalty: float = 1.0  # 1.0: off


GREEDY = Sampling()


class PromptProfile(ABC):
    """Turns a job into prompt tokens and the generated text into the translation.

    ``version`` is part of the translation memory's key: bump it whenever the prompt a profile
    builds changes, so that no translation made with the old prompt is served for the new one.
    """

    name: str
    version: str = "1"
    supports: frozenset[Control] = frozenset()
    sampling: Sampling = GREEDY
    stop_strings: tuple[str, ...] = ()  # generation ends at any of these (and the text is cut there)
    piece_unit: PieceUnit = "text"
    """The largest unit the model is given in one request (the translator keeps the breaks between units).

    ``text``: a whole text if it fits, else paragraphs packed into pieces that fit. ``line``: every
    line on its own. ``sentence``: every sentence of every line on its own, for a model that answers
    one line and was shown one-sentence examples (few-shot on a base model): a multi-paragraph text
    keeps its paragraphs instead of being flattened into one line, and a long line does not run
    on past its budget.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    @property
    def identity(self) -> str:
        """``name:version``, as the translation memory keys it."""
        return f"{self.name}:{self.version}"

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
        """The translation contained in the generated text (cut at the first stop string, trimmed)."""
        return cut_at_stop_strings(generated, self.stop_strings).strip()

    def check_controls(self, spec: JobSpec) -> None:
        """Raise :class:`UnsupportedControlError` if ``spec`` asks for a control this profile cannot apply."""
        asked = requested_controls(spec)
        missing = sorted(asked - self.supports)
        if missing:
            raise UnsupportedControlError(
                f"prompt profile {self.name!r} cannot apply {' or '.join(missing)} (its model was not trained to "
                f"take {'it' if len(missing) == 1 else 'them'}; it supports "
                f"{', '.join(sorted(self.supports)) or 'no controls'}); send the job without "
                f"{'it' if len(missing) == 1 else 'them'}, or serve a model whose profile supports "
                f"{'it' if len(missing) == 1 else 'them'} (docs/guides/bring-your-own-model.md)"
            )


def requested_controls(spec: JobSpec) -> set[Control]:
    """The controls ``spec`` asks for (a glossary counts only if one of its terms is in the text)."""
    asked: set[Control] = set()
    if glossary_in_text(spec):
        asked.add(Control.GLOSSARY)
    if spec.context is not None:
        asked.add(Control.CONTEXT)
    if spec.formality is not None:
        asked.add(Control.FORMALITY)
    return asked


def glossary_in_text(spec: JobSpec) -> list[tuple[str, str]]:
    """The glossary entries whose source term occurs in the text (ignoring case), in glossary order."""
    if not spec.glossary:
        return []
    folded = spec.text.casefold()
    return [(source, target) for source, target in spec.glossary.items() if source.casefold() in folded]


TAGS_INSTRUCTION = (
    "The text contains placeholder tags such as <x1>…</x1> and <x2/>: keep every tag exactly once, "
    "around the translation of the words it surrounds."
)


def keeps_tags(spec: JobSpec) -> bool:
    """Whether the job's text carries placeholder tags its translation must keep (a document segment)."""
    return spec.inline_tags and has_tags(spec.text)


def formality_words(formality: Formality) -> str:
    """How an instruction names a register ("a formal register")."""
    return "a formal register" if formality is Formality.FORMAL else "an informal register"


def languages(spec: JobSpec) -> tuple[str, str]:
    """English names of the source and target languages ("French", "Portuguese (Brazil)")."""
    return language_name(spec.source_lang), language_name(spec.target_lang)


def cut_at_stop_strings(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the earliest of ``stops`` (all of it when none occurs)."""
    cut = len(text)
    for stop in stops:
        if stop:
            at = text.find(stop)
            if at != -1:
                cut = min(cut, at)
    return text[:cut]


def chat_prompt(tokenizer: Tokenizer, messages: list[dict[str, Any]], **template_kwargs: Any) -> str:
    """``messages`` through the tokenizer's chat template, ready for the assistant's answer.

    A template that refuses the job (TranslateGemma's knows a fixed list of language codes, and
    raises for any other) fails that job at once with :class:`UnrunnableJobError`: the same prompt
    would be refused on every retry.
    """
    template: Any = tokenizer
    try:
        return str(
            template.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
        )
    except Exception as exc:
        from jinja2 import TemplateError

        if not isinstance(exc, TemplateError):
            raise
        raise template_refused(exc) from exc


def template_refused(exc: Exception) -> UnrunnableJobError:
    """The error for a job whose prompt a template cannot render: what it said and what to check."""
    return UnrunnableJobError(
        f"the prompt template refused this job ({type(exc).__name__}: {exc}); check that the prompt profile "
        "fits the model and that its template knows the job's languages (`dragoman model check PATH --profile "
        "NAME --source-lang .. --target-lang ..` shows the prompt it builds)"
    )


def newline_token_ids(tokenizer: Tokenizer) -> list[int]:
    """Ids of every token whose text contains a line break.

    SentencePiece vocabularies spell it ``\\n`` (or the byte token ``<0x0A>``); byte-level BPE
    spells it ``Ċ``, which in a SentencePiece vocabulary is a Maltese letter, not a newline.
    """
    vocab: dict[str, int] = getattr(tokenizer, "get_vocab")()  # noqa: B009
    markers = ("\n", "<0x0A>") if ("\n" in vocab or "<0x0A>" in vocab) else ("Ċ",)
    return sorted(i for token, i in vocab.items() if any(m in token for m in markers))
