"""``--engines auto``: the model's size from its config, and the engine count from size and GPU memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.engine_count import choose_engine_count, estimate_parameters, gpu_ids

# The shapes measured on the H100 (issue 15): Llama-3.2-1B/3B and Llama-3.1-8B dimensions, SmolLM2-135M.
SHAPES = {
    "135m": {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "intermediate_size": 1536,
             "num_attention_heads": 9, "num_key_value_heads": 3},
    "1b": {"hidden_size": 2048, "num_hidden_layers": 16, "vocab_size": 128256, "intermediate_size": 8192,
           "num_attention_heads": 32, "num_key_value_heads": 8},
    "3b": {"hidden_size": 3072, "num_hidden_layers": 28, "vocab_size": 128256, "intermediate_size": 8192,
           "num_attention_heads": 24, "num_key_value_heads": 8},
    "8b": {"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 128256, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": False},
}  # fmt: skip
H100 = 80 * 10**9


def _model(tmp_path: Path, name: str, config: dict[str, object]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("shape", "low", "high"),
    [("135m", 0.13e9, 0.14e9), ("1b", 1.2e9, 1.3e9), ("3b", 3.1e9, 3.3e9), ("8b", 7.9e9, 8.1e9)],
)
def test_parameters_are_estimated_from_the_config(tmp_path: Path, shape: str, low: float, high: float) -> None:
    parameters = estimate_parameters(_model(tmp_path, shape, SHAPES[shape]))
    assert parameters is not None and low <= parameters <= high


def test_a_nested_text_config_is_read_and_an_unreadable_one_is_unknown(tmp_path: Path) -> None:
    nested = _model(tmp_path, "gemma", {"text_config": SHAPES["1b"]})
    assert estimate_parameters(nested) == estimate_parameters(_model(tmp_path, "flat", SHAPES["1b"]))
    assert estimate_parameters(_model(tmp_path, "partial", {"hidden_size": 8})) is None
    assert estimate_parameters(tmp_path / "missing") is None


@pytest.mark.parametrize(("shape", "engines"), [("135m", 5), ("1b", 3), ("3b", 2), ("8b", 1)])
def test_auto_follows_the_measured_table_on_an_h100(tmp_path: Path, shape: str, engines: int) -> None:
    parameters = estimate_parameters(_model(tmp_path, shape, SHAPES[shape]))
    assert choose_engine_count(parameters, H100, 0.85) == engines


def test_auto_is_one_engine_without_a_gpu_an_unknown_size_or_the_memory_for_more() -> None:
    assert choose_engine_count(135_000_000, None, 0.85) == 1
    assert choose_engine_count(None, H100, 0.85) == 1
    assert choose_engine_count(3_200_000_000, 16 * 10**9, 0.85) == 1  # a 16 GB GPU holds one 3B engine
    assert choose_engine_count(135_000_000, 2 * 10**9, 0.85) == 2  # a small GPU caps a small model too
    assert choose_engine_count(1_200_000_000, 24 * 10**9, 0.85) == 2  # a 24 GB GPU holds two 1B engines


def test_gpus_are_parsed_or_refused_with_the_reason() -> None:
    assert gpu_ids(None) is None
    assert gpu_ids("0,1") == ["0", "1"]
    assert gpu_ids(" 3 ") == ["3"]
    for bad in ("", "0,,1", "a", "0,0", "-1"):
        with pytest.raises(ValueError, match="--gpus"):
            gpu_ids(bad)
