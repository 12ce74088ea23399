"""The engine interface the worker drives.

The worker only needs four things from an engine: a tokenizer, the context length, an async
``generate`` for one tokenised request, and ``abort``. :class:`worker.vllm_engine.VllmEngine`
wraps vLLM's ``AsyncLLM``; :class:`worker.deterministic_engine.DeterministicEngine` is a
model-free stand-in for unit tests, pipeline benchmarks and ``--engine echo``. The real engine's
options are vLLM's own (:mod:`worker.engine_args`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec


class Tokenizer(Protocol):
    """The slice of a Hugging Face tokenizer the worker uses."""

    @property
    def bos_token_id(self) -> int | None:
        """Id prepended to prompts, if the model uses one."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Token ids of ``text``."""

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str:
        """Text of ``token_ids``."""


class GenerationRequest(msgspec.Struct, frozen=True):
    """One tokenised prompt for the engine."""

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    stop_token_ids: Sequence[int] = ()
    temperature: float = 0.0  # greedy: translations are reproducible
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    repetition_penalty: float = 1.0  # 1.0: off
    stop: tuple[str, ...] = ()  # generation ends at any of these strings (the engine detokenizes then)
    seed: int | None = None
    priority: int = 0  # lower first, when the engine schedules by priority (Lane.engine_priority)
    stop_on_repetition: bool = False
    """Watch the output while it is generated and end it with finish reason ``repetition`` once its tail
    loops (:func:`contract.repetition.repeating_tail` on the token ids) instead of at ``max_tokens``."""


class GenerationResult(msgspec.Struct, frozen=True):
    """The engine's final output for one request (token ids; decoding is the caller's job)."""

    token_ids: Sequence[int]
    finish_reason: str | None  # stop, length (the budget), abort, repetition (stop_on_repetition saw a loop)


class TranslationEngine(Protocol):
    """What the worker needs from an inference engine."""

    @property
    def model_name(self) -> str:
        """Name recorded in each job's row."""

    @property
    def max_model_len(self) -> int:
        """Context length in tokens (prompt plus output)."""

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer."""

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Run one request to completion (greedy) and return its output."""

    async def abort(self, request_id: str) -> None:
        """Stop a running request; its ``generate`` call ends without a result."""

    def shutdown(self) -> None:
        """Release the engine's processes and memory."""
