"""The engine interface the worker drives, and the options that build a real one.

The worker only needs four things from an engine: a tokenizer, the context length, an async
``generate`` for one tokenised request, and ``abort``. :class:`worker.vllm_engine.VllmEngine`
wraps vLLM's ``AsyncLLM``; :class:`worker.deterministic_engine.DeterministicEngine` is a
model-free stand-in for unit tests and pipeline benchmarks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
    priority: int = 0  # lower first, when the engine schedules by priority (Priority.engine_priority)


class GenerationResult(msgspec.Struct, frozen=True):
    """The engine's final output for one request (token ids; decoding is the caller's job)."""

    token_ids: Sequence[int]
    finish_reason: str | None


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


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """vLLM engine options the ``dragoman worker`` command passes through.

    The defaults run on a CPU-only machine shared with other work.
    """

    model: str | None = None
    max_num_seqs: int = 64
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = 2048
    gpu_memory_utilization: float = 0.25
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    enforce_eager: bool = True
    # Largest step (in tokens) run from a CUDA graph; bigger steps run eagerly, one Python call per
    # kernel. vLLM's default, min(2 x max_num_seqs, 512), leaves most steps of a continuously fed
    # engine (every running decode plus new prompts) eager: on an H100 that cost 18% of the 8B
    # shape's throughput at max_num_seqs 512 (bench/RESULTS.md). None: vLLM's default. Only
    # matters with enforce_eager off; vLLM caps it at max_num_batched_tokens.
    max_cudagraph_capture_size: int | None = 2048
    load_format: str = "auto"
    # On a CPU vLLM sizes the KV cache as a fraction of RAM minus everything the process already
    # holds, which fails or starves on a shared machine; a fixed size is predictable.
    cpu_kv_cache_gib: float = 1.0
    log_stats: bool = True  # vLLM's engine metrics (vllm:* on /metrics) and its periodic throughput log line
    ignore_eos: bool = False  # benchmarks with dummy weights: output lengths come from max_tokens alone
    # "priority": interactive jobs' requests are scheduled before waiting bulk ones (vLLM's
    # priority policy); "fcfs": in arrival order, the lanes only order what the worker reads.
    scheduling_policy: str = "fcfs"
    extra: dict[str, object] = field(default_factory=dict)
