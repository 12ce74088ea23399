"""Profiles for general instruct models: one user message through the model's chat template.

``chat`` is the fallback for any model with a chat template; ``qwen3``, ``gemma3`` and ``llama3``
add the sampling their model cards recommend (and, for Qwen3, thinking switched off). All of them
take every control as an extra line of the instruction.
"""

from __future__ import annotations

from typing import Any, ClassVar

from contract.controls import Control
from contract.schemas import JobSpec
from worker.profiles.base import (
    TAGS_INSTRUCTION,
    PromptProfile,
    Sampling,
    chat_prompt,
    formality_words,
    glossary_in_text,
    keeps_tags,
    languages,
)

ALL_CONTROLS = frozenset(Control)


def instruction(spec: JobSpec) -> str:
    """The user message: the task, one line per control the job carries, a blank line, the text."""
    source, target = languages(spec)
    lines = [f"Translate the following text from {source} to {target}. Reply with the translation only."]
    if spec.formality is not None:
        lines.append(f"Use {formality_words(spec.formality)}.")
    terms = glossary_in_text(spec)
    if terms:
        lines.append("Translate these terms as given: " + "; ".join(f"{src} -> {tgt}" for src, tgt in terms) + ".")
    if spec.context is not None:
        lines.append(f"For reference only, not to translate, the text around it: {spec.context}")
    if keeps_tags(spec):
        lines.append(TAGS_INSTRUCTION)
    return "\n".join(lines) + f"\n\n{spec.text}"


class ChatProfile(PromptProfile):
    """Any instruct model with a chat template: greedy, every control as an instruction line."""

    name = "chat"
    supports = ALL_CONTROLS
    template_kwargs: ClassVar[dict[str, Any]] = {}

    def build_prompt(self, spec: JobSpec) -> str:
        """The chat template applied to the instruction and the text."""
        return chat_prompt(self.tokenizer, [{"role": "user", "content": instruction(spec)}], **self.template_kwargs)

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The templated prompt's ids (the template already carries any BOS token)."""
        return self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)


class Qwen3Profile(ChatProfile):
    """Qwen3 instruct models with thinking off (``enable_thinking=False`` in its chat template).

    Sampling from the Qwen3 model card (huggingface.co/Qwen/Qwen3-8B, "Best Practices"): for
    non-thinking mode, temperature 0.7, top_p 0.8, top_k 20.
    """

    name = "qwen3"
    sampling = Sampling(temperature=0.7, top_p=0.8, top_k=20)
    template_kwargs: ClassVar[dict[str, Any]] = {"enable_thinking": False}


class Gemma3Profile(ChatProfile):
    """Gemma 3 instruct models (``-it``).

    Sampling from their ``generation_config.json`` (huggingface.co/google/gemma-3-4b-it):
    top_k 64, top_p 0.95, at temperature 1.0.
    """

    name = "gemma3"
    sampling = Sampling(temperature=1.0, top_p=0.95, top_k=64)


class Llama3Profile(ChatProfile):
    """Llama 3.x instruct models.

    Sampling from their ``generation_config.json`` (huggingface.co/meta-llama/Llama-3.1-8B-Instruct):
    temperature 0.6, top_p 0.9.
    """

    name = "llama3"
    sampling = Sampling(temperature=0.6, top_p=0.9)
