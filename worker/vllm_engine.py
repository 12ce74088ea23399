"""The real engine: vLLM's ``AsyncLLM`` in this process, fed one tokenised request per job.

Requests ask for ``FINAL_ONLY`` output and no detokenisation: the worker decodes once per job,
which keeps vLLM's frontend (the bottleneck for small models) free of per-token string work.
A request with ``stop_on_repetition`` is the exception: it is streamed (``DELTA`` outputs, one every
:data:`worker.loop_watch.WATCH_EVERY_TOKENS` tokens where vLLM can batch them), watched by a
:class:`worker.loop_watch.LoopWatch`, and aborted in vLLM as soon as its tail loops.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contract.errors import EngineError, EngineNotInstalledError, EngineUnavailableError, ModelError
from worker.device_defaults import detect_device, plan_engines
from worker.engine import GenerationRequest, GenerationResult, Tokenizer
from worker.engine_args import async_engine_args, cpu_has_bf16, parse_engine_args, platform_is_cpu
from worker.engine_count import estimate_parameters
from worker.extras import INSTALL_HINT
from worker.loop_watch import WATCH_EVERY_TOKENS, LoopWatch

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
        self._delta = RequestOutputKind.DELTA
        # vLLM 0.32 batches a streamed request's outputs (one every N tokens) when asked; older
        # releases (the GPU machine's 0.26) stream every token, which the watch handles as well.
        self._stream_interval = hasattr(SamplingParams, "stream_interval")
        self.watch_every = WATCH_EVERY_TOKENS
        """Tokens between two looks at a watched request (and between its streamed outputs)."""
        self._dead_error: type[BaseException] = EngineDeadError
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def start(
        cls,
        model_path: Path,
        engine_args: Sequence[str] = (),
        *,
        ignore_eos: bool = False,
        defaults: Mapping[str, object] | None = None,
    ) -> VllmEngine:
        """Build the engine (blocking: tens of seconds on a CPU) for the model at ``model_path``.

        ``engine_args`` are vLLM's engine arguments as its command line spells them
        (``["--max-num-seqs", "16", "--max-model-len=1024"]``; :mod:`worker.engine_args`), dragoman's
        defaults filling in what they leave out: ``defaults`` (from the worker's
        :class:`worker.device_defaults.EnginePlan`), else the device's for one engine of this model.
        ``ignore_eos``: every request generates its whole output budget (benchmarks with ``--load-format dummy`` only).
        """
        check_model_path(model_path)
        try:
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:  # the CLI checked first; a library caller, or a broken install, lands here
            raise EngineNotInstalledError(f"the vLLM engine cannot be imported ({exc}): {INSTALL_HINT}") from exc

        on_cpu = platform_is_cpu()
        if defaults is None:
            device = detect_device(None, on_cpu=on_cpu)
            defaults = plan_engines(device, estimate_parameters(model_path), {}, engines=1).vllm_defaults
        values = parse_engine_args(
            engine_args, on_cpu=on_cpu, cpu_has_bf16=cpu_has_bf16() if on_cpu else False, defaults=defaults
        )
        llm = AsyncLLM.from_engine_args(async_engine_args(model_path, values))
        tokenizer: Any = llm.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # older vLLM releases made this a coroutine
            raise EngineError("this vLLM release is not supported: get_tokenizer() is async")
        engine = cls(llm, model_path.name, tokenizer)
        engine._ignore_eos = ignore_eos
        return engine

    @property
    def max_num_seqs(self) -> int:
        """Sequences the engine batches at once, as vLLM settled it (its default depends on the hardware)."""
        return int(self._llm.vllm_config.scheduler_config.max_num_seqs)

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

        A request with ``stop_on_repetition`` is watched while it generates and ends with finish
        reason ``repetition`` (its tokens up to the checkpoint where its tail looped, the request
        aborted in vLLM so its slot is free) instead of running on to ``max_tokens``.

        Raises :class:`EngineUnavailableError` when called from another event loop than the
        first call's: ``AsyncLLM`` starts its output handler on that loop once, and a request
        from any other loop would wait for its output forever.
        """
        self._check_loop()
        watched = request.stop_on_repetition
        streaming: dict[str, Any] = {}
        if watched and self._stream_interval:
            streaming["stream_interval"] = self.watch_every
        params = self._sampling_params(
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=request.top_k,
            repetition_penalty=request.repetition_penalty,
            seed=request.seed,
            max_tokens=request.max_tokens,
            stop_token_ids=list(request.stop_token_ids),
            stop=list(request.stop) or None,
            output_kind=self._delta if watched else self._final_only,
            detokenize=bool(request.stop),  # stop strings are matched on text; token ids are decoded by the caller
            ignore_eos=self._ignore_eos,
            **streaming,
        )
        prompt = self._tokens_prompt(prompt_token_ids=request.prompt_token_ids)
        token_ids: Sequence[int]
        if watched:
            token_ids, reason = await self._watch(request, prompt, params)
        else:
            token_ids, reason = await self._final(request, prompt, params)
        if self._ignore_eos and reason == "length":
            # Benchmarks on dummy weights: the budget is how every output is meant to end, not a
            # cut-off translation to retry with more room (which would run each job twice).
            reason = "stop"
        return GenerationResult(token_ids=token_ids, finish_reason=reason)

    async def _final(self, request: GenerationRequest, prompt: Any, params: Any) -> tuple[Sequence[int], str | None]:
        """The hot path: one ``FINAL_ONLY`` output per request, nothing per token."""
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
        return completion.token_ids, completion.finish_reason

    async def _watch(self, request: GenerationRequest, prompt: Any, params: Any) -> tuple[list[int], str | None]:
        """Stream ``DELTA`` outputs into one token list, stopping the request once a checkpoint loops."""
        watch = LoopWatch(self.watch_every)
        token_ids: list[int] = []
        reason: str | None = None
        outputs = 0
        stream = self._llm.generate(prompt, params, request_id=request.request_id, priority=request.priority)
        try:
            async for output in stream:
                outputs += 1
                if not output.outputs:
                    continue
                completion = output.outputs[0]
                token_ids.extend(completion.token_ids)
                reason = completion.finish_reason
                # Every checkpoint is looked at, the last output's too: where a request stops is a
                # function of its tokens, however vLLM batched them (as on the deterministic engine).
                end = watch.loop_end(token_ids)
                if end is not None and (reason is None or end < len(token_ids)):
                    del token_ids[end:]
                    reason = "repetition"
                    break
        except self._dead_error as exc:
            raise EngineUnavailableError(f"the vLLM engine died: {exc}") from exc
        finally:
            # After the break: closing vLLM's generator aborts the request there (its own path for
            # a caller that stops listening), which frees its sequence slot and KV cache at once.
            await stream.aclose()
        if outputs == 0:
            raise EngineError(f"engine returned no output for request {request.request_id}")
        return token_ids, reason

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
