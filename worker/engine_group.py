"""An engine group (``dragoman worker --engines N --gpus 0,1``): what runs on each GPU, and each engine's process.

The parent starts the services, runs the migrations and prepares the model once; then it
supervises one worker process per engine (:class:`worker.supervisor.EngineSupervisor`), each
told its GPU, its share of that GPU's memory, its own metrics port and consumer name. The
command that starts a worker is the caller's (the CLI's); this module adds what differs per
engine: vLLM engine arguments after the parent's, and ``DRAGOMAN_*`` settings in its environment. The
parent serves the engine group's /metrics, /healthz and /readyz on ``DRAGOMAN_METRICS_PORT``
(:class:`worker.engine_group_ops.EngineGroupOpsServer`), from what each child serves on its own port.

With ``--interactive-engine`` each GPU group also runs one small engine for interactive jobs: its
regular engines read with the lane policy ``bulk`` (interactive jobs only once they have waited
the spill delay) and the added one with ``interactive`` (interactive jobs first, bulk only within
``DRAGOMAN_INTERACTIVE_BULK_IN_FLIGHT``), with ``--interactive-max-seqs`` sequences and no more
jobs in flight than that plus its bulk cap, so vLLM never queues an interactive request behind
bulk ones.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from contract.services import ServiceUrls
from contract.settings import Settings
from worker.engine_args import with_overrides
from worker.engine_count import (
    choose_engine_count,
    interactive_memory_share,
    regular_memory_share,
)
from worker.supervisor import ChildSpec, OpsAddress

log = logging.getLogger("dragoman.worker")

INTERACTIVE_MAX_SEQS = 32
"""``--interactive-max-seqs``' default: sequences the interactive engine batches at once."""


@dataclass(frozen=True, slots=True)
class InteractiveEngine:
    """The engine ``--interactive-engine`` adds to each GPU group: its engine batch, its jobs in flight (that batch
    plus its bulk cap, so none waits in vLLM's queue), its share of the GPU's memory."""

    max_num_seqs: int
    max_in_flight: int
    memory: float


@dataclass(frozen=True, slots=True)
class EngineGroupLayout:
    """What runs on each GPU group: ``engines`` regular engines with ``memory`` of the GPU each, and the
    interactive engine if asked for."""

    engines: int
    memory: float
    interactive: InteractiveEngine | None = None

    @classmethod
    def even(cls, engines: int, memory_fraction: float) -> EngineGroupLayout:
        """``engines`` regular engines sharing ``memory_fraction`` of their GPU evenly, no interactive one."""
        return cls(engines, round(memory_fraction / engines, 4))

    @property
    def engines_per_group(self) -> int:
        """Worker processes per GPU group, the interactive engine included."""
        return self.engines + (self.interactive is not None)

    def describe(self, groups: list[list[str]]) -> str:
        """The layout as the engine group's start line says it (bench.engines reads the engine count from it)."""
        added = " + 1 interactive" if self.interactive else ""
        line = (
            f"running {self.engines_per_group * len(groups)} engines ({self.engines} per GPU group{added}, "
            f"groups {[','.join(g) or 'default' for g in groups]}), each with {self.memory:.4g} of its GPU's memory"
        )
        if self.interactive is None:
            return line
        return (
            f"{line}; lane policy bulk on those, and an interactive engine with {self.interactive.memory:.4g}, "
            f"{self.interactive.max_num_seqs} sequences and {self.interactive.max_in_flight} jobs in flight "
            "(lane policy interactive)"
        )


def engine_group_layout(
    engines: int | str | None,
    settings: Settings,
    whole: float,
    parameters: int | None,
    gpu_memory: int | None,
    *,
    interactive: bool = False,
    interactive_max_seqs: int | None = None,
) -> EngineGroupLayout:
    """The engines of each GPU group: ``engines`` (a count, or ``auto`` or None from the model's size) sharing ``whole``
    of their GPU's memory (the engine group's ``--gpu-memory-utilization``), plus the interactive engine if asked for
    (``interactive_max_seqs`` sequences, default :data:`INTERACTIVE_MAX_SEQS`), for a model of ``parameters``
    and GPUs of ``gpu_memory`` bytes (None: unknown, or no GPU). Raises ``ValueError`` when the interactive
    engine does not fit."""
    count = choose_engine_count(parameters, gpu_memory, whole) if engines in ("auto", None) else int(engines)
    if not interactive:
        return EngineGroupLayout.even(count, whole)
    share = interactive_memory_share(parameters, gpu_memory, whole, count)
    seqs = interactive_max_seqs or INTERACTIVE_MAX_SEQS
    added = InteractiveEngine(seqs, seqs + settings.interactive_bulk_in_flight, share)
    return EngineGroupLayout(count, regular_memory_share(whole, count, share), added)


def gpu_groups(gpus: list[str] | None, tensor_parallel_size: int) -> list[list[str]]:
    """The GPUs each engine group spans: one group per GPU, or ``tensor_parallel_size`` GPUs per group.

    ``[[]]`` (one group, the GPUs left as they are) when no ``--gpus`` was given.
    """
    if gpus is None:
        return [[]]
    if len(gpus) % tensor_parallel_size:
        raise ValueError(
            f"--gpus lists {len(gpus)} GPUs, which do not divide into groups of --tensor-parallel-size "
            f"{tensor_parallel_size}"
        )
    return [gpus[i : i + tensor_parallel_size] for i in range(0, len(gpus), tensor_parallel_size)]


def child_specs(
    settings: Settings,
    command: Sequence[str],
    engine_args: Sequence[str],
    urls: ServiceUrls,
    groups: list[list[str]],
    layout: EngineGroupLayout,
    port_files: Path,
    environ: Mapping[str, str] = os.environ,
) -> list[ChildSpec]:
    """One :class:`ChildSpec` per engine: ``command`` (a one-engine worker of the model the engine group serves), then
    the parent's ``engine_args`` (vLLM's, ``DRAGOMAN_ENGINE_ARGS``' included) with the engine's own overrides
    after them (its share of the memory as the :class:`EngineGroupLayout` says; the interactive engine's batch), its
    GPU group; the interactive engine (if any) last on each GPU group (named ``gpu0-interactive``, started
    after that GPU's regular engines). What differs per engine beside the engine arguments goes in its
    environment as settings: ``DRAGOMAN_LANE_POLICY`` (``bulk`` and ``interactive`` beside an interactive
    engine, else ``settings.lane_policy``), ``DRAGOMAN_MAX_IN_FLIGHT`` (the interactive engine's, else
    ``settings.max_in_flight``), ``DRAGOMAN_LOG_FORMAT``.

    Each engine serves its ops endpoints on ``DRAGOMAN_METRICS_PORT`` + 1, + 2, ..., on loopback
    unless ``DRAGOMAN_METRICS_HOST`` names one address: the engine group's port is the one Prometheus and
    the probes use, and the parent must know where each engine is. When that port is 0 (any free
    one) or metrics are off, each engine binds a free port itself and writes it to a file in the
    folder ``port_files``. With metrics off the engines still answer on loopback: their ``/readyz``
    is how the engine group knows an engine is up before it starts the next one on the same GPU
    (``start_after``).
    """
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    physical = visible.split(",") if visible else None
    ops_host = child_ops_host(settings.metrics_host) if settings.metrics_enabled else "127.0.0.1"
    fixed_ports = bool(settings.metrics_port and settings.metrics_enabled)
    specs: list[ChildSpec] = []
    for group in groups:
        for engine in range(layout.engines_per_group):
            interactive = layout.interactive if engine == layout.engines else None
            name = "interactive" if interactive else f"e{engine}"
            label = f"gpu{'+'.join(group)}-{name}" if group else name
            if fixed_ports:
                ops = OpsAddress(ops_host, settings.metrics_port + 1 + len(specs))
            else:
                ops = OpsAddress(ops_host, 0, port_file=port_files / f"{label}.port")
            env = {
                "DRAGOMAN_ENGINE": settings.engine,
                "DRAGOMAN_ENGINE_ARGS": "",  # the parent's are on the command line, before the engine's overrides
                "DRAGOMAN_REDIS_URL": urls.redis_url,
                "DRAGOMAN_DATABASE_URL": urls.database_url,
                "DRAGOMAN_METRICS_ENABLED": "true",
                "DRAGOMAN_METRICS_HOST": ops_host,
                "DRAGOMAN_METRICS_PORT": str(ops.port),
                "DRAGOMAN_LOG_FORMAT": settings.log_format,
                **_lane_settings(settings, layout, interactive),
            }
            if settings.engine == "echo":
                env["DRAGOMAN_ECHO_DELAY_MS"] = str(settings.echo_delay_ms)
                env["DRAGOMAN_ECHO_MODE"] = settings.echo_mode
            if settings.served_model_names:  # the parent's --served-model-name, for every engine
                env["DRAGOMAN_SERVED_MODEL_NAMES"] = json.dumps(settings.served_model_names)
            if ops.port_file is not None:
                env["DRAGOMAN_OPS_PORT_FILE"] = str(ops.port_file)
            if group:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(physical[int(i)] if physical else i for i in group)
            if settings.consumer_name:
                env["DRAGOMAN_CONSUMER_NAME"] = f"{settings.consumer_name}-{label}"
            overrides = _engine_overrides(layout, interactive) if settings.engine == "vllm" else {}
            argv = [*command, *with_overrides(engine_args, overrides)]
            after = specs[-1].name if engine > 0 else None  # the engine before it on the same GPU(s)
            specs.append(ChildSpec(name=label, argv=argv, env=env, ops=ops, start_after=after))
    return specs


def child_ops_host(metrics_host: str) -> str:
    """Where an engine group's engines serve their ops endpoints: loopback when the group listens on every interface.

    The engine group's port is the public one (``0.0.0.0`` in the image, for the kubelet and Prometheus);
    the engines' ports stay inside the machine or pod (``curl localhost:9465/readyz`` there, or
    ``kubectl port-forward``). A single address (``10.0.0.5``) is used for the engines too.
    """
    return "127.0.0.1" if metrics_host in ("", "0.0.0.0", "::") else metrics_host


def _engine_overrides(layout: EngineGroupLayout, interactive: InteractiveEngine | None) -> dict[str, object]:
    """The vLLM engine arguments one engine of the engine group runs with after the parent's: its memory share, and the
    interactive engine's batch size."""
    if interactive is None:
        return {"--gpu-memory-utilization": layout.memory}
    return {"--gpu-memory-utilization": interactive.memory, "--max-num-seqs": interactive.max_num_seqs}


def _lane_settings(
    settings: Settings, layout: EngineGroupLayout, interactive: InteractiveEngine | None
) -> dict[str, str]:
    """One engine's lane policy and jobs in flight, as settings for its environment."""
    if interactive is not None:
        return {"DRAGOMAN_LANE_POLICY": "interactive", "DRAGOMAN_MAX_IN_FLIGHT": str(interactive.max_in_flight)}
    policy = "bulk" if layout.interactive is not None else settings.lane_policy
    lanes = {"DRAGOMAN_LANE_POLICY": policy}
    return lanes | ({"DRAGOMAN_MAX_IN_FLIGHT": str(settings.max_in_flight)} if settings.max_in_flight else {})
