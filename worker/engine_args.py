"""vLLM's engine arguments: vLLM's own parser reads them; dragoman only fills in its defaults on a CPU.

``dragoman worker`` takes every option vLLM's engine has, spelled as vLLM spells it
(``--max-num-seqs 256 --no-enforce-eager``), on the command line or in ``DRAGOMAN_ENGINE_ARGS``:
whatever the worker's own parser does not know passes through to the parser vLLM's entry points
mount (``AsyncEngineArgs.add_cli_args`` on a ``FlexibleArgumentParser``), so an option vLLM gains
needs no change here. The environment's arguments come first and the command line's after them,
so a flag overrides the variable (argparse keeps the last value given).

dragoman's own defaults, :data:`CPU_DEFAULTS` and :data:`GPU_DEFAULTS`, apply only to options the
arguments leave out. vLLM is imported only by the functions here that parse (never at import),
so the base install and ``--engine echo`` never load it.
"""

from __future__ import annotations

import argparse
import logging
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from contract.errors import EngineArgumentsError

CPU_DEFAULTS: Mapping[str, object] = {
    # vLLM reserves this fraction of host RAM on a CPU (its 0.92 fails on a machine shared with other work).
    "gpu_memory_utilization": 0.25,
    # A fixed KV cache instead of a fraction of what RAM is left: predictable on a shared machine.
    "kv_cache_memory_bytes": 2**30,
    # Starts in ~45 s instead of ~120 s.
    "enforce_eager": True,
    # The default model's whole context would not fit the 1 GiB KV cache; translations are short.
    "max_model_len": 2048,
    "max_num_seqs": 64,
}
"""dragoman's defaults for an engine on a CPU, where they differ from vLLM's (DESIGN.md)."""

GPU_DEFAULTS: Mapping[str, object] = {
    # CUDA graphs: eager mode is for a CPU (vLLM 0.26 itself defaults to graphs, said here so the plan shows it).
    "enforce_eager": False,
    # All the group's engines together (vLLM 0.26's own 0.92 leaves less for anything else on the GPU).
    "gpu_memory_utilization": 0.9,
    # Largest step (in tokens) run from a CUDA graph; bigger steps run eagerly, one Python call per
    # kernel. vLLM's default, min(2 x max_num_seqs, 512), leaves most steps of a continuously fed
    # engine eager: on an H100 that cost 18% of the 8B shape's throughput at max_num_seqs 512
    # (bench/RESULTS.md). Only matters without --enforce-eager; vLLM caps it at max_num_batched_tokens.
    "max_cudagraph_capture_size": 2048,
}
"""dragoman's defaults for an engine on any GPU; ``max_num_seqs`` and ``max_num_batched_tokens`` follow the GPU and
the model (:func:`worker.device_defaults.gpu_vllm_defaults`)."""

RETIRED_FLAGS: Mapping[str, str] = {
    "--cpu-kv-cache-gib": "vLLM's --kv-cache-memory-bytes sizes the KV cache (e.g. 512M, 2G; dragoman's default on "
    "a CPU is 1G)",
    "--log-stats": "vLLM's engine metrics are on unless --disable-log-stats",
    "--no-log-stats": "vLLM's own flag is --disable-log-stats",
}
"""dragoman's former spellings of vLLM options, refused with the option to use instead."""

CPU_DTYPE_REASONS = {
    "float32": "this CPU has no bfloat16 instructions; emulated, bfloat16 ran 4x slower on an AVX2 machine",
    "bfloat16": "this CPU computes in bfloat16 natively",
}
"""Why :func:`parse_engine_args` picked a CPU engine's dtype when asked for ``auto`` (logged at start)."""

log = logging.getLogger(__name__)
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
_UNSET = object()  # a default of dragoman's own: the arguments did not give this option


def describe_defaults(defaults: Mapping[str, object]) -> str:
    """``defaults`` as the flags that would give them (``--max-num-seqs 64, --enforce-eager, ...``), for help texts."""
    flags = []
    for name, value in defaults.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else f"--no-{flag[2:]}")
        elif name.endswith("_bytes") and isinstance(value, int) and value % 2**20 == 0:
            flags.append(f"{flag} {value >> 30}G" if value % 2**30 == 0 else f"{flag} {value >> 20}M")
        else:
            flags.append(f"{flag} {value}")
    return ", ".join(flags)


def split_engine_args(value: str) -> list[str]:
    """``DRAGOMAN_ENGINE_ARGS`` as arguments, split as a POSIX shell splits a command line."""
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise EngineArgumentsError(f"DRAGOMAN_ENGINE_ARGS cannot be split into arguments: {exc} ({value!r})") from None


def engine_argv(environment: str, flags: Sequence[str]) -> list[str]:
    """The engine arguments of a worker: the environment's (``DRAGOMAN_ENGINE_ARGS``), then the command line's,
    which therefore win."""
    return [*split_engine_args(environment), *flags]


def with_overrides(argv: Sequence[str], overrides: Mapping[str, object]) -> list[str]:
    """``argv`` then ``overrides`` (``{"--max-num-seqs": 32}``: options that take a value), each as ``--name=value``.

    The last value of an option wins in vLLM's parser; an earlier one spelled as ``overrides`` spells it
    (``--name value``, ``--name=value``, or with underscores) is dropped too, so vLLM does not warn of a
    duplicate. What an engine group's child runs: the parent's engine arguments, then its own.
    """
    names = set(overrides)
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name, equals, _ = arg.partition("=")
        if name.startswith("--") and "--" + name[2:].replace("_", "-") in names:
            skip = not equals
            continue
        kept.append(arg)
    return [*kept, *(f"{name}={value}" for name, value in overrides.items())]


def engine_arg_parser() -> argparse.ArgumentParser:
    """vLLM's own parser of engine arguments, as its entry points build it; its errors raise
    :class:`EngineArgumentsError` instead of exiting. Imports vLLM."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # in vLLM 0.26 (the GPU machine's) and 0.32

    class EngineArgParser(FlexibleArgumentParser):  # type: ignore[misc,unused-ignore]  # Any where vLLM is missing
        """Raises instead of printing vLLM's whole usage and exiting."""

        def error(self, message: str) -> NoReturn:
            raise EngineArgumentsError(
                f"vLLM refused the engine arguments: {message} (`dragoman worker --help-engine` lists them)"
            )

    parser = EngineArgParser(prog="dragoman worker", usage="dragoman worker [vLLM engine arguments]")  # type: ignore[no-untyped-call,unused-ignore]
    built: argparse.ArgumentParser = AsyncEngineArgs.add_cli_args(parser)
    return built


def engine_help() -> str:
    """Every engine argument vLLM takes, with its help, as ``dragoman worker --help-engine`` prints it."""
    parser = engine_arg_parser()
    return argparse.ArgumentParser.format_help(parser)  # the whole list, not vLLM's summary of its groups


def parse_engine_args(
    argv: Sequence[str], *, on_cpu: bool, cpu_has_bf16: bool = False, defaults: Mapping[str, object] | None = None
) -> dict[str, Any]:
    """The engine arguments ``argv`` give, as vLLM's parser reads them (a dict of its namespace), with
    dragoman's defaults where ``argv`` leaves an option out: ``defaults`` (the device's, from
    :func:`worker.device_defaults.plan_engines`), else :data:`CPU_DEFAULTS` or :data:`GPU_DEFAULTS`.

    On a CPU, ``dtype`` ``auto`` means float32 unless the CPU computes bfloat16 natively (a model
    stored in bfloat16 otherwise runs through emulation, 4x slower on our AVX2 machines). The
    ``model`` is the caller's to set: dragoman resolves it (``--model``, the default model).
    """
    for flag in argv:
        name = flag.split("=", 1)[0].replace("_", "-")
        if name in RETIRED_FLAGS:
            raise EngineArgumentsError(f"{name} is no longer a dragoman flag: {RETIRED_FLAGS[name]}")
    parser = engine_arg_parser()
    if defaults is None:
        defaults = CPU_DEFAULTS if on_cpu else GPU_DEFAULTS
    parser.set_defaults(**dict.fromkeys([*defaults, "model"], _UNSET))
    values: dict[str, Any] = vars(parser.parse_args(list(argv)))
    if values.pop("model") is not _UNSET:
        raise EngineArgumentsError(
            "the model is dragoman's to resolve: give it as `dragoman worker --model PATH`, not among vLLM's "
            "engine arguments (DRAGOMAN_ENGINE_ARGS)"
        )
    left_out = [name for name in defaults if values.get(name) is _UNSET]
    for name in left_out:
        values[name] = defaults[name]
    if "max_cudagraph_capture_size" in left_out and (
        values.get("enforce_eager") or _capture_sizes_given(values.get("compilation_config"))
    ):
        values["max_cudagraph_capture_size"] = None  # eager, or the compilation config says: vLLM's own
    if on_cpu and values.get("dtype") == "auto":
        values["dtype"] = "bfloat16" if cpu_has_bf16 else "float32"
        log.info("CPU engine: weights in %s (%s)", values["dtype"], CPU_DTYPE_REASONS[values["dtype"]])
    return values


def given_engine_options(argv: Sequence[str], names: Sequence[str]) -> dict[str, Any]:
    """Which of the options ``names`` (vLLM's, with underscores) ``argv`` sets, and to what, as vLLM's parser reads
    them: what the user chose, for :func:`worker.device_defaults.plan_engines`. Imports vLLM; refuses bad arguments
    like :func:`parse_engine_args`."""
    parser = engine_arg_parser()
    parser.set_defaults(**dict.fromkeys(names, _UNSET))
    values = vars(parser.parse_args(list(argv)))
    return {name: values[name] for name in names if values.get(name, _UNSET) is not _UNSET}


def _capture_sizes_given(compilation: object) -> bool:
    """Whether ``--compilation-config`` (or ``-cc.…``) already says which steps run from CUDA graphs (vLLM parses
    it into a ``CompilationConfig``; a dict in some releases)."""
    keys = ("max_cudagraph_capture_size", "cudagraph_capture_sizes")
    if isinstance(compilation, Mapping):
        return any(compilation.get(key) is not None for key in keys)
    return any(getattr(compilation, key, None) is not None for key in keys)


def async_engine_args(model_path: Path, values: Mapping[str, Any]) -> Any:
    """vLLM's ``AsyncEngineArgs`` for ``values`` (from :func:`parse_engine_args`) serving ``model_path``."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs.from_cli_args(argparse.Namespace(**{**values, "model": str(model_path)}))


def platform_is_cpu() -> bool:
    """Whether vLLM runs on a CPU here (imports vLLM)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bfloat16 instructions (AVX512-BF16 or AMX); ``False`` if it cannot tell."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    flags = next((line.partition(":")[2].split() for line in text.splitlines() if line.startswith("flags")), [])
    return not _BF16_FLAGS.isdisjoint(flags)
