"""``dragoman worker --engines N --gpus 0,1``: the command lines of an engine group's worker processes.

The parent starts the services, runs the migrations and prepares the model once; then it
supervises one ``dragoman worker`` child per engine (:class:`worker.supervisor.EngineSupervisor`),
each told its GPU, its share of that GPU's memory, its own metrics port and consumer name. The
parent serves the group's /metrics, /healthz and /readyz on ``DRAGOMAN_METRICS_PORT``
(:class:`worker.group_ops.EngineGroupOpsServer`), from what each child serves on its own port.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from contract.services import ServiceUrls
from contract.settings import Settings
from worker.engine import EngineOptions
from worker.supervisor import ChildSpec, OpsAddress

log = logging.getLogger("dragoman.worker")


def parse_engines(value: str) -> int | str:
    """``--engines``: ``auto`` or a whole number of engines per GPU, 1 or more."""
    if value == "auto":
        return value
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number of engines, got {value!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"a GPU runs at least one engine, got {count}")
    return count


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
    args: argparse.Namespace,
    settings: Settings,
    options: EngineOptions,
    model_path: Path,
    urls: ServiceUrls,
    groups: list[list[str]],
    engines_per_group: int,
    port_files: Path,
    environ: Mapping[str, str] = os.environ,
) -> list[ChildSpec]:
    """One :class:`ChildSpec` per engine: the same options, its GPU group, ``1/engines`` of the memory.

    Each engine serves its ops endpoints on ``DRAGOMAN_METRICS_PORT`` + 1, + 2, ..., on loopback
    unless ``DRAGOMAN_METRICS_HOST`` names one address: the group's port is the one Prometheus and
    the probes use, and the parent must know where each engine is. When that port is 0 (any free
    one) or metrics are off, each engine binds a free port itself and writes it to a file in the
    folder ``port_files``. With metrics off the engines still answer on loopback: their ``/readyz``
    is how the group knows an engine is up before it starts the next one on the same GPU
    (``start_after``).
    """
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    physical = visible.split(",") if visible else None
    fraction = round(options.gpu_memory_utilization / engines_per_group, 4)
    ops_host = child_ops_host(settings.metrics_host) if settings.metrics_enabled else "127.0.0.1"
    fixed_ports = bool(settings.metrics_port and settings.metrics_enabled)
    specs: list[ChildSpec] = []
    for group in groups:
        for engine in range(engines_per_group):
            label = f"gpu{'+'.join(group)}-e{engine}" if group else f"e{engine}"
            if fixed_ports:
                ops = OpsAddress(ops_host, settings.metrics_port + 1 + len(specs))
            else:
                ops = OpsAddress(ops_host, 0, port_file=port_files / f"{label}.port")
            env = {
                "DRAGOMAN_REDIS_URL": urls.redis_url,
                "DRAGOMAN_DATABASE_URL": urls.database_url,
                "DRAGOMAN_METRICS_ENABLED": "true",
                "DRAGOMAN_METRICS_HOST": ops_host,
                "DRAGOMAN_METRICS_PORT": str(ops.port),
            }
            if ops.port_file is not None:
                env["DRAGOMAN_OPS_PORT_FILE"] = str(ops.port_file)
            if group:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(physical[int(i)] if physical else i for i in group)
            if settings.consumer_name:
                env["DRAGOMAN_CONSUMER_NAME"] = f"{settings.consumer_name}-{label}"
            argv = [sys.executable, "-m", "cli.main", "worker", *_engine_flags(args, options, model_path, fraction)]
            after = specs[-1].name if engine > 0 else None  # the engine before it on the same GPU(s)
            specs.append(ChildSpec(name=label, argv=argv, env=env, ops=ops, start_after=after))
    return specs


def child_ops_host(metrics_host: str) -> str:
    """Where a group's engines serve their ops endpoints: loopback when the group listens on every interface.

    The group's port is the public one (``0.0.0.0`` in the image, for the kubelet and Prometheus);
    the engines' ports stay inside the machine or pod (``curl localhost:9465/readyz`` there, or
    ``kubectl port-forward``). A single address (``10.0.0.5``) is used for the engines too.
    """
    return "127.0.0.1" if metrics_host in ("", "0.0.0.0", "::") else metrics_host


def _engine_flags(args: argparse.Namespace, options: EngineOptions, model_path: Path, fraction: float) -> list[str]:
    """The ``dragoman worker`` flags that make a child run the engine the parent was asked for."""
    flags = [
        "--engines=1",
        f"--model={model_path}",
        f"--max-num-seqs={options.max_num_seqs}",
        f"--gpu-memory-utilization={fraction}",
        f"--cpu-kv-cache-gib={options.cpu_kv_cache_gib}",
        f"--dtype={options.dtype}",
        f"--tensor-parallel-size={options.tensor_parallel_size}",
        "--enforce-eager" if options.enforce_eager else "--no-enforce-eager",
        f"--max-cudagraph-capture-size={options.max_cudagraph_capture_size or 0}",
        f"--load-format={options.load_format}",
        "--log-stats" if options.log_stats else "--no-log-stats",
        f"--scheduling-policy={options.scheduling_policy}",
        f"--log-level={args.log_level}",
    ]
    if options.max_model_len is not None:
        flags.append(f"--max-model-len={options.max_model_len}")
    if options.max_num_batched_tokens is not None:
        flags.append(f"--max-num-batched-tokens={options.max_num_batched_tokens}")
    if options.ignore_eos:
        flags.append("--ignore-eos")
    if args.profile:
        flags.append(f"--profile={args.profile}")
    if args.profile_file:
        flags.append(f"--profile-file={args.profile_file.resolve()}")
    if args.max_in_flight:
        flags.append(f"--max-in-flight={args.max_in_flight}")
    if args.log_format:
        flags.append(f"--log-format={args.log_format}")
    return flags
