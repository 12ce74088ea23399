"""How many engines one GPU should run for a model: ``--engines auto``.

One vLLM engine's core runs on one CPU thread, and for small models that thread, not the GPU,
is the limit. Measured with real ``dragoman worker`` processes (bench/RESULTS.md, issue 15),
engines started one after the other: 135M: 3.42x at K=4, 4.54x at K=5 (H100); 1B (Llama-3.2-1B
shape): 1.79x at K=2, each engine still at 90% of a lone one's rate, 2.62x at K=3 (H100); 3B:
1.41x at K=2; 8B: 0.93x at K=2. So the count follows the size of the weights, and is then
capped by what the GPU's memory holds.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENGINES_BY_WEIGHT_GB: tuple[tuple[float, int], ...] = ((1.0, 5), (4.0, 3), (8.0, 2))
"""(weights below this many GB, engines per GPU); anything larger gets one engine."""

BYTES_PER_PARAMETER = 2  # bf16 / fp16 weights
MEMORY_PER_WEIGHT = 3.0  # an engine needs its weights plus at least twice that for KV cache and activations


def estimate_parameters(model_path: Path) -> int | None:
    """The model's parameter count, from its ``config.json`` (None when it cannot be read).

    Counted from the shapes rather than the weight files, so that a folder with a config and
    dummy weights (the GPU benchmarks) gives the real model's size.
    """
    try:
        config: dict[str, Any] = json.loads((model_path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    config = config.get("text_config", config)  # multimodal configs nest the language model's
    try:
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        vocab = int(config["vocab_size"])
        intermediate = int(config.get("intermediate_size", 4 * hidden))
        heads = int(config.get("num_attention_heads", 1))
        kv_heads = int(config.get("num_key_value_heads", heads))
        head_dim = int(config.get("head_dim", hidden // heads))
    except (KeyError, TypeError, ValueError):
        return None
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    mlp = 3 * hidden * intermediate  # gate, up, down
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    return embeddings + layers * (attention + mlp)


def choose_engine_count(parameters: int | None, gpu_memory_bytes: int | None, memory_fraction: float) -> int:
    """Engines per GPU for a model of ``parameters`` on a GPU of ``gpu_memory_bytes`` (None: no GPU).

    One engine when there is no GPU or the size is unknown; never more than the memory holds
    with room for each engine's KV cache; never more than one for a model whose single engine
    already keeps the GPU busy.
    """
    if gpu_memory_bytes is None or parameters is None:
        return 1
    weight_bytes = parameters * BYTES_PER_PARAMETER
    by_size = next((count for limit, count in ENGINES_BY_WEIGHT_GB if weight_bytes < limit * 1e9), 1)
    by_memory = int(gpu_memory_bytes * memory_fraction // (weight_bytes * MEMORY_PER_WEIGHT))
    return max(1, min(by_size, by_memory))


INTERACTIVE_MIN_MEMORY = 0.05
"""The smallest share of its GPU's memory the interactive engine gets (KV cache for its few sequences)."""

INTERACTIVE_MIN_PER_WEIGHT = 1.5
"""The interactive engine must hold its weights and half as much again, or it is refused."""


def interactive_memory_share(
    parameters: int | None, gpu_memory_bytes: int | None, memory_fraction: float, regular_engines: int
) -> float:
    """The share of its GPU's memory for the engine ``--interactive-engine`` adds beside ``regular_engines``.

    ``max(0.05, weights x 3 / GPU memory)``, an engine's need by the same rule as
    :func:`choose_engine_count`, capped so that each regular engine keeps that need out of
    ``memory_fraction``. Without a GPU or a known size, 0.05 (never more than an equal share).
    Raises ``ValueError`` with the reason when what is left cannot hold the interactive engine's
    weights and some KV cache.
    """
    if gpu_memory_bytes is None or parameters is None:
        return _floor(min(INTERACTIVE_MIN_MEMORY, memory_fraction / (regular_engines + 1)))
    weight_bytes = parameters * BYTES_PER_PARAMETER
    need = weight_bytes * MEMORY_PER_WEIGHT / gpu_memory_bytes
    share = _floor(min(max(INTERACTIVE_MIN_MEMORY, need), memory_fraction - regular_engines * need))
    if share * gpu_memory_bytes < weight_bytes * INTERACTIVE_MIN_PER_WEIGHT:
        gib = 2**30
        raise ValueError(
            f"--interactive-engine: {regular_engines} engine(s) of {need * gpu_memory_bytes / gib:.1f} GiB each "
            f"leave {max(0.0, share) * gpu_memory_bytes / gib:.1f} GiB of --gpu-memory-utilization "
            f"{memory_fraction} x {gpu_memory_bytes / gib:.0f} GiB for the interactive engine, less than its "
            f"{weight_bytes / gib:.1f} GiB of weights and their KV cache need; run fewer --engines, raise "
            "--gpu-memory-utilization, or leave --interactive-engine out (a model this large keeps the GPU "
            "busy with one engine: a second one only takes GPU time from bulk jobs)"
        )
    return share


def regular_memory_share(memory_fraction: float, regular_engines: int, interactive_share: float) -> float:
    """Each regular engine's share once the interactive engine has ``interactive_share`` (all of them add up
    to at most ``memory_fraction``)."""
    return _floor((memory_fraction - interactive_share) / regular_engines)


def _floor(fraction: float) -> float:
    """A memory fraction rounded down to 4 decimals, so that shares never add up to more than the whole."""
    return math.floor(round(fraction * 10_000, 6)) / 10_000


def gpu_ids(spec: str | None) -> list[str] | None:
    """The GPUs ``--gpus`` names: ``all`` (every visible one), or a comma-separated list of ids; None if not given.

    Raises ``ValueError`` with the reason for an empty or malformed list, or ``all`` without a GPU.
    """
    if spec is None:
        return None
    if spec.strip() == "all":
        count = _visible_gpu_count()
        if count == 0:
            raise ValueError("--gpus all: no GPU is visible to this process (is CUDA_VISIBLE_DEVICES empty?)")
        return [str(i) for i in range(count)]
    ids = [part.strip() for part in spec.split(",")]
    if not ids or any(not part.isdigit() for part in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"--gpus takes 'all' or distinct GPU numbers separated by commas (0,1), got {spec!r}")
    return ids


def gpu_memory_bytes(device: str | None) -> int | None:
    """Total memory of GPU ``device`` (the first visible one for None); None where there is no GPU.

    Asks vLLM's platform (NVML on NVIDIA GPUs) where vLLM is installed, which leaves CUDA uninitialised
    in this process (vLLM's engine core then forks as usual); else torch.
    """
    try:
        from vllm.platforms import current_platform
    except ImportError:
        pass
    else:
        if not current_platform.is_cuda_alike():
            return None
        return int(current_platform.get_device_total_memory(int(device or 0)))
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(int(device or 0)).total_memory)


def gpu_name(device: str | None) -> str:
    """The name of GPU ``device`` (``NVIDIA H100 80GB HBM3``); empty where it cannot be told."""
    try:
        from vllm.platforms import current_platform

        return str(current_platform.get_device_name(int(device or 0)))
    except Exception:  # any platform's failure only leaves the name out (vLLM's own defaults do the same)
        return ""


def _visible_gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
