"""The real engine: vLLM's ``AsyncLLM`` in this process, fed one tokenised request per job.

Requests ask for ``FINAL_ONLY`` output and no detokenisation: the worker decodes once per job,
which keeps vLLM's frontend (the bottleneck for small models) free of per-token string work.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from pathlib import Path
from typing import Any

from contract.errors import EngineError, EngineNotInstalledError, EngineUnavailableError, ModelError
from worker.engine import EngineOptions, GenerationRequest, GenerationResult, Tokenizer
from worker.extras import INSTALL_HINT

log = logging.getLogger(__name__)


class VllmEngine:
    """:class:`worker.engine.TranslationEngine` backed by ``vllm.v1.engine.async_llm.AsyncLLM``."""

    def __init__(self, llm: Any, model_name: str, tokenizer: Tokenizer) -> None:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.exceptions import EngineDeadError

        self._llm = llm
        self._ignore_eos = False
        self._model_name = model_name
        self._tokenizer = tokenizer
        self._sampling_params = SamplingParams
        self._tokens_prompt = TokensPrompt
        self._final_only = RequestOutputKind.FINAL_ONLY
        self._dead_error: type[BaseException] = EngineDeadError
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def start(cls, model_path: Path, options: EngineOptions) -> VllmEngine:
        """Build the engine (blocking: tens of seconds on a CPU) for the model at ``model_path``."""
        check_model_path(model_path)
        try:
            from vllm import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:  # the CLI checked first; a library caller, or a broken install, lands here
            raise EngineNotInstalledError(f"the vLLM engine cannot be imported ({exc}): {INSTALL_HINT}") from exc

        from vllm.platforms import current_platform

        on_cpu = bool(current_platform.is_cpu())
        kwargs = engine_arguments(model_path, options, on_cpu=on_cpu, cpu_has_bf16=cpu_has_bf16() if on_cpu else False)
        if on_cpu and options.dtype == "auto":
            log.info("CPU engine: weights in %s (%s)", kwargs["dtype"], CPU_DTYPE_REASONS[kwargs["dtype"]])
        args = AsyncEngineArgs(**kwargs)
        llm = AsyncLLM.from_engine_args(args)
        tokenizer: Any = llm.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # older vLLM releases made this a coroutine
            raise EngineError("this vLLM release is not supported: get_tokenizer() is async")
        engine = cls(llm, model_path.name, tokenizer)
        engine._ignore_eos = options.ignore_eos
        return engine

    @property
    def model_name(self) -> str:
        """The model folder's name."""
        return self._model_name

    @property
    def max_model_len(self) -> int:
        """The context length vLLM settled on."""
        return int(self._llm.model_config.max_model_len)

    @property
    def tokenizer(self) -> Tokenizer:
        """vLLM's tokenizer for the model."""
        return self._tokenizer

    @property
    def frontend(self) -> Any:
        """vLLM's ``AsyncLLM`` itself, for benchmarks that read its state (requests it holds)."""
        return self._llm

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Decode one request (greedy unless it asks for sampling) and return its final token ids.

        Raises :class:`EngineUnavailableError` when called from another event loop than the
        first call's: ``AsyncLLM`` starts its output handler on that loop once, and a request
        from any other loop would wait for its output forever.
        """
        self._check_loop()
        params = self._sampling_params(
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=request.top_k,
            repetition_penalty=request.repetition_penalty,
            seed=request.seed,
            max_tokens=request.max_tokens,
            stop_token_ids=list(request.stop_token_ids),
            stop=list(request.stop) or None,
            output_kind=self._final_only,
            detokenize=bool(request.stop),  # stop strings are matched on text; token ids are decoded by the caller
            ignore_eos=self._ignore_eos,
        )
        prompt = self._tokens_prompt(prompt_token_ids=request.prompt_token_ids)
        final = None
        try:
            async for output in self._llm.generate(
                prompt, params, request_id=request.request_id, priority=request.priority
            ):
                final = output
        except self._dead_error as exc:
            raise EngineUnavailableError(f"the vLLM engine died: {exc}") from exc
        if final is None or not final.outputs:
            raise EngineError(f"engine returned no output for request {request.request_id}")
        completion = final.outputs[0]
        reason = completion.finish_reason
        if self._ignore_eos and reason == "length":
            # Benchmarks on dummy weights: the budget is how every output is meant to end, not a
            # cut-off translation to retry with more room (which would run each job twice).
            reason = "stop"
        return GenerationResult(token_ids=completion.token_ids, finish_reason=reason)

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise EngineUnavailableError(
                "this vLLM engine is bound to the event loop that first used it (its output handler runs "
                "there) and cannot serve requests from another loop; start one engine per event loop"
            )

    async def abort(self, request_id: str) -> None:
        """Abort a running request in vLLM."""
        await self._llm.abort(request_id)

    def shutdown(self) -> None:
        """Stop vLLM's engine-core process (idempotent)."""
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.shutdown()
            # AsyncLLM.__del__ shuts down a second time, and when that happens during interpreter
            # teardown the functions it calls are already gone (a TypeError traceback on exit).
            llm.__class__ = type("StoppedAsyncLLM", (type(llm),), {"__del__": lambda self: None})


CPU_DTYPE_REASONS = {
    "float32": "this CPU has no bfloat16 instructions; emulated, bfloat16 ran 4x slower on an AVX2 machine",
    "bfloat16": "this CPU computes in bfloat16 natively",
}
"""Why :func:`engine_arguments` picked a CPU engine's dtype when asked for ``auto`` (logged at start)."""

_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bfloat16 instructions (AVX512-BF16 or AMX); ``False`` if it cannot tell."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    flags = next((line.partition(":")[2].split() for line in text.splitlines() if line.startswith("flags")), [])
    return not _BF16_FLAGS.isdisjoint(flags)


def engine_arguments(
    model_path: Path, options: EngineOptions, *, on_cpu: bool = False, cpu_has_bf16: bool = False
) -> dict[str, Any]:
    """vLLM's ``AsyncEngineArgs`` for ``options`` (``extra`` passes anything else through).

    On a CPU, ``dtype="auto"`` means float32 unless the CPU computes bfloat16 natively (a model
    stored in bfloat16 otherwise runs through emulation, 4x slower on our AVX2 machines), and
    the KV cache gets ``options.cpu_kv_cache_gib`` instead of a fraction of RAM.
    """
    dtype = options.dtype
    if on_cpu and dtype == "auto":
        dtype = "bfloat16" if cpu_has_bf16 else "float32"
    kwargs: dict[str, Any] = {
        "model": str(model_path),
        "max_num_seqs": options.max_num_seqs,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_model_len": options.max_model_len,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "dtype": dtype,
        "tensor_parallel_size": options.tensor_parallel_size,
        "enforce_eager": options.enforce_eager,
        "load_format": options.load_format,
        "disable_log_stats": not options.log_stats,
        "scheduling_policy": options.scheduling_policy,
        **({"kv_cache_memory_bytes": int(options.cpu_kv_cache_gib * 2**30)} if on_cpu else {}),
        **options.extra,
    }
    if options.max_cudagraph_capture_size is not None and not options.enforce_eager:
        compilation = dict(kwargs.get("compilation_config") or {})
        compilation["max_cudagraph_capture_size"] = options.max_cudagraph_capture_size
        kwargs["compilation_config"] = compilation
    return kwargs


def check_model_path(model_path: Path) -> None:
    """Fail before the engine starts if ``model_path`` is not a readable model folder."""
    if not model_path.exists():
        raise ModelError(
            f"model path {model_path} does not exist; pass --model PATH to a Hugging Face model "
            "folder, or run `dragoman model prepare` for the default model"
        )
    config = model_path / "config.json"
    if not model_path.is_dir() or not config.is_file():
        raise ModelError(f"{model_path} is not a model folder (no config.json inside)")
    try:
        config.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read {config}: {exc}") from exc
