"""What a worker runs when its flags leave a choice open: dragoman's defaults from the device it finds.

:func:`plan_engines` is a pure function of the device (CPU, or a GPU's memory and name), the
model's parameter count and what the user gave (vLLM's engine arguments, ``--engines``,
``--interactive-engine``, ``--max-in-flight``), so its rules are tested on a machine without a
GPU or vLLM. Every value it picks is a default: a flag or ``DRAGOMAN_ENGINE_ARGS`` wins, and the
:class:`EnginePlan` says which values came from where (logged in one start line, written in the
worker's heartbeat, shown by ``dragoman stats``).

On a GPU with no flags (measured on an H100, bench/RESULTS.md):

- **CUDA graphs, never eager.** Eager mode is for a CPU, where it starts in ~45 s instead of ~120 s.
- **The batch of ``vllm serve``, not of vLLM's engine context.** ``AsyncLLM.from_engine_args`` runs
  under vLLM's ``ENGINE_CONTEXT``, which ``EngineArgs.get_batch_defaults`` (vllm/engine/arg_utils.py;
  read in vLLM 0.32, the same table in 0.26) does not list, so vLLM falls back to 128 sequences and
  2,048 batched tokens; ``OPENAI_API_SERVER`` (``vllm serve``) gets 1,024 sequences and 8,192 tokens on
  a GPU of at least 70 GiB that is not an A100 (16,384 at 160 GiB and more), 256 and 2,048 elsewhere. On
  the H100 (vLLM 0.26, 1B shape, one engine) no flags ran 100.0 jobs/s and ``--max-num-seqs 256``
  130.3 (bench/results/issue31/gpu-1b-*.json); 256 sequences measured best per engine for 1B, and
  512 for the 8B shape's one engine on an 80 GB GPU (108.8 jobs/s against 99.2 at 256). So: 512
  sequences for a model that runs one engine per GPU (weights of 8 GB and more) on a GPU of 70 GiB or
  more, 256 otherwise; ``vllm serve``'s batched-token budget for the GPU.
- **``--engines auto``**: several engines for small models, whose one engine's scheduler thread
  cannot keep the GPU busy (:mod:`worker.engine_count`).
- **0.9 of the GPU's memory in total**, shared among the group's engines (vLLM 0.26's own default,
  0.92, leaves less room for a second process on the GPU).
- **The interactive engine** (:mod:`worker.engine_group`) whenever the group runs several regular
  engines: interactive jobs get an engine whose batch never fills with bulk requests, while the
  regular engines drain bulk work. This, not vLLM's priority scheduling, is the default mechanism for
  "interactive traffic fast while a bulk batch drains": priority scheduling preempts running bulk
  requests, which then recompute, and on the H100 it made interactive latency worse (p95 7.1 s
  against 5.8 s with fcfs, bulk 0.85x; RESULTS.md, seventh session), while the interactive engine gave
  1.97x the idle p95 (135M). A model that runs one engine per GPU gets no interactive engine: its one
  engine keeps the GPU busy, and a second one would only take GPU time from bulk jobs.
- **Jobs in flight: 2 x max_num_seqs**, so vLLM's waiting queue never runs dry.

On a CPU: :data:`worker.engine_args.CPU_DEFAULTS` (eager, a fixed 1 GiB KV cache, 0.25 of host
RAM, 64 sequences) and one engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from worker.engine_args import CPU_DEFAULTS, GPU_DEFAULTS
from worker.engine_count import (
    BYTES_PER_PARAMETER,
    ENGINES_BY_WEIGHT_GB,
    choose_engine_count,
    gpu_memory_bytes,
    gpu_name,
)

Source = Literal["flag", "default", "engine group", "vLLM"]
"""Where a value came from: the user's flags or DRAGOMAN_ENGINE_ARGS, dragoman's device defaults, the engine group that
started this engine (its memory share, the interactive engine's batch), or vLLM's own default."""

GPU_MEMORY_UTILIZATION = float(GPU_DEFAULTS["gpu_memory_utilization"])  # type: ignore[arg-type]
"""The share of a GPU's memory a worker's engines use together, by default."""

LARGE_GPU_BYTES = 70 * 2**30
"""From this much memory (not an A100) vLLM's ``vllm serve`` defaults give the large batch; so do dragoman's."""

HUGE_GPU_BYTES = 160 * 2**30
"""From this much memory ``vllm serve`` batches 16,384 tokens per step."""

SEQS_SMALL_MODEL = 256
"""Sequences per engine for a model that runs several engines per GPU (measured best for 1B on an H100)."""

SEQS_LARGE_MODEL = 512
"""Sequences of a large model's one engine on a GPU of :data:`LARGE_GPU_BYTES` (8B on an H100: 1.10x 256)."""

SEQS_OTHER_GPU = 256
"""Sequences per engine on a smaller GPU (``vllm serve``'s default there)."""

SINGLE_ENGINE_WEIGHT_BYTES = int(ENGINES_BY_WEIGHT_GB[-1][0] * 1e9)
"""Weights from this size up run one engine per GPU (:data:`worker.engine_count.ENGINES_BY_WEIGHT_GB`)."""

PLANNED_OPTIONS = (
    "enforce_eager",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_cudagraph_capture_size",
    "kv_cache_memory_bytes",
    "max_model_len",
    "tensor_parallel_size",
)
"""vLLM's options whose defaults dragoman sets, or whose value its plan reads."""


@dataclass(frozen=True, slots=True)
class Device:
    """What the worker runs on: a CPU (``gpu_memory_bytes`` None), or a GPU with its total memory and name."""

    gpu_memory_bytes: int | None = None
    gpu_name: str = ""

    @property
    def is_cpu(self) -> bool:
        """Whether there is no GPU."""
        return self.gpu_memory_bytes is None

    def describe(self) -> str:
        """``CPU``, or ``GPU NVIDIA H100 80GB HBM3 (79 GiB)``, for the start line."""
        if self.gpu_memory_bytes is None:
            return "CPU"
        name = f"{self.gpu_name} " if self.gpu_name else ""
        return f"GPU {name}({self.gpu_memory_bytes / 2**30:.0f} GiB)"


def detect_device(gpu: str | None, *, on_cpu: bool) -> Device:
    """The device an engine of this worker runs on: ``on_cpu`` (vLLM's platform says so), else GPU ``gpu`` (the
    first visible one for None), found through vLLM's platform without initialising CUDA here."""
    if on_cpu:
        return Device()
    memory = gpu_memory_bytes(gpu)
    return Device() if memory is None else Device(memory, gpu_name(gpu))


@dataclass(frozen=True, slots=True)
class Chosen:
    """One planned value and where it came from."""

    value: Any
    source: Source


@dataclass(frozen=True, slots=True)
class EnginePlan:
    """What a worker runs: its engines per GPU group, each one's memory share and batch, eager or CUDA graphs, jobs in
    flight; each :class:`Chosen` says whether the user or dragoman picked it. ``vllm_defaults`` are the vLLM options
    dragoman fills in where the arguments leave them out."""

    device: Device
    parameters: int | None
    engines: Chosen
    interactive: Chosen
    memory: Chosen  # the whole share of the GPU's (or host's) memory, all the group's engines together
    max_num_seqs: Chosen
    max_num_batched_tokens: Chosen
    eager: Chosen
    max_in_flight: Chosen
    vllm_defaults: Mapping[str, object] = field(default_factory=dict)
    interactive_off_reason: str = ""

    @property
    def engine_group(self) -> bool:
        """Whether the worker runs its engines as child processes (several engines, or the interactive one)."""
        return int(self.engines.value) > 1 or bool(self.interactive.value)

    def describe(self, memory_per_engine: float | None = None) -> str:
        """The plan as the worker's start line says it, each value with its source in brackets."""
        count = int(self.engines.value)
        added = " + 1 interactive" if self.interactive.value else ""
        size = f"{self.parameters / 1e9:.2f}B parameters" if self.parameters else "size unknown"
        share = memory_per_engine if memory_per_engine is not None else self.memory.value / count
        seqs = "vLLM's" if self.max_num_seqs.value is None else str(self.max_num_seqs.value)
        tokens = "vLLM's" if self.max_num_batched_tokens.value is None else str(self.max_num_batched_tokens.value)
        in_flight = "2 x vLLM's max_num_seqs" if self.max_in_flight.value is None else str(self.max_in_flight.value)
        line = (
            f"engine plan on {self.device.describe()}, model {size}: "
            f"{count} engine(s){added} [{self.engines.source}], "
            f"memory {self.memory.value:.4g} in total [{self.memory.source}], {share:.4g} per engine, "
            f"max_num_seqs {seqs} [{self.max_num_seqs.source}], "
            f"max_num_batched_tokens {tokens} [{self.max_num_batched_tokens.source}], "
            f"{'eager' if self.eager.value else 'CUDA graphs'} [{self.eager.source}], "
            f"{in_flight} jobs in flight per engine [{self.max_in_flight.source}]"
        )
        if self.interactive_off_reason:
            line += f"; no interactive engine: {self.interactive_off_reason}"
        return line + " (flags and DRAGOMAN_ENGINE_ARGS override each)"

    def summary(self) -> str:
        """One engine's settings in a few words, for its heartbeat and ``dragoman stats``:
        ``graphs seqs=256(default) mem=0.27(engine group) in_flight=512(default)``."""
        seqs = "vllm" if self.max_num_seqs.value is None else self.max_num_seqs.value
        in_flight = "2xseqs" if self.max_in_flight.value is None else self.max_in_flight.value
        return (
            f"{'eager' if self.eager.value else 'graphs'}({self.eager.source}) "
            f"seqs={seqs}({self.max_num_seqs.source}) "
            f"mem={self.memory.value:.4g}({self.memory.source}) "
            f"in_flight={in_flight}({self.max_in_flight.source})"
        )


def plan_engines(
    device: Device,
    parameters: int | None,
    given: Mapping[str, Any],
    *,
    engines: int | str | None = None,
    interactive: bool | None = None,
    lanes_given: bool = False,
    max_in_flight: int | None = None,
    group_member: bool = False,
) -> EnginePlan:
    """dragoman's plan for a worker on ``device`` serving a model of ``parameters`` (None: unknown).

    ``given`` holds the vLLM options the user's arguments set (name to value, as vLLM's parser reads them);
    ``engines`` is ``--engines`` (None: not given, so ``auto`` on a GPU and 1 on a CPU); ``interactive`` is
    ``--interactive-engine`` / ``--no-interactive-engine`` (None: on by default where a GPU runs several
    regular engines and ``lanes_given`` is false, i.e. no lane policy was set); ``max_in_flight`` is
    ``--max-in-flight`` or ``DRAGOMAN_MAX_IN_FLIGHT``. ``group_member``: this worker is one engine an engine
    group started, and its memory share (and the interactive engine's batch) came from the group, not from
    the user.
    """
    from_group: Source = "engine group" if group_member else "flag"
    if device.is_cpu:
        defaults: dict[str, object] = dict(CPU_DEFAULTS)
    else:
        defaults = gpu_vllm_defaults(device, parameters)
    defaults = {name: value for name, value in defaults.items() if name not in given}

    def chosen(name: str, source_when_given: Source = "flag") -> Chosen:
        if name in given:
            return Chosen(given[name], source_when_given)
        if name in defaults:
            return Chosen(defaults[name], "default")
        return Chosen(None, "vLLM")

    memory = chosen("gpu_memory_utilization", from_group)
    seqs = chosen("max_num_seqs")
    eager = chosen("enforce_eager")
    if eager.value is None:
        eager = Chosen(False, "vLLM")
    if engines is not None:
        count = Chosen(engines if engines != "auto" else _auto_engines(device, parameters, memory), "flag")
    elif device.is_cpu:
        count = Chosen(1, "default")
    else:
        count = Chosen(_auto_engines(device, parameters, memory), "default")
    if group_member:
        count = Chosen(1, "engine group")
    added, reason = _interactive(device, int(count.value), interactive, lanes_given, group_member)
    if max_in_flight:
        in_flight = Chosen(max_in_flight, "flag")
    elif isinstance(seqs.value, int):
        in_flight = Chosen(2 * seqs.value, "default")
    else:
        in_flight = Chosen(None, "default")  # 2 x what vLLM settles on, known once the engine is up
    return EnginePlan(
        device=device,
        parameters=parameters,
        engines=count,
        interactive=added,
        memory=memory if memory.value is not None else Chosen(GPU_MEMORY_UTILIZATION, "vLLM"),
        max_num_seqs=seqs,
        max_num_batched_tokens=chosen("max_num_batched_tokens"),
        eager=eager,
        max_in_flight=in_flight,
        vllm_defaults=defaults,
        interactive_off_reason=reason,
    )


def gpu_vllm_defaults(device: Device, parameters: int | None) -> dict[str, object]:
    """vLLM options dragoman sets on a GPU where the arguments leave them out (see the module's docstring)."""
    memory = device.gpu_memory_bytes or 0
    large_gpu = memory >= LARGE_GPU_BYTES and "a100" not in device.gpu_name.lower()
    one_engine_model = parameters is not None and parameters * BYTES_PER_PARAMETER >= SINGLE_ENGINE_WEIGHT_BYTES
    if not large_gpu:
        seqs, tokens = SEQS_OTHER_GPU, 2048
    else:
        seqs = SEQS_LARGE_MODEL if one_engine_model else SEQS_SMALL_MODEL
        tokens = 16384 if memory >= HUGE_GPU_BYTES else 8192
    return {**GPU_DEFAULTS, "max_num_seqs": seqs, "max_num_batched_tokens": tokens}


def _auto_engines(device: Device, parameters: int | None, memory: Chosen) -> int:
    """``--engines auto``: one on a CPU, else from the model's size and what the memory share holds."""
    if device.is_cpu:
        return 1
    return choose_engine_count(parameters, device.gpu_memory_bytes, float(memory.value or GPU_MEMORY_UTILIZATION))


def _interactive(
    device: Device, engines: int, given: bool | None, lanes_given: bool, group_member: bool
) -> tuple[Chosen, str]:
    """Whether the group adds the interactive engine, and why not when dragoman's default leaves it out."""
    if group_member:
        return Chosen(False, "engine group"), ""
    if given is not None:
        return Chosen(given, "flag"), ""
    if device.is_cpu:
        return Chosen(False, "default"), ""  # the CPU runs one engine
    if engines < 2:
        return Chosen(False, "default"), "one engine per GPU keeps it busy (--interactive-engine adds one)"
    if lanes_given:
        return Chosen(False, "default"), "a lane policy was given"
    return Chosen(True, "default"), ""
