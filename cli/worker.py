"""``dragoman worker``, ``dragoman model prepare`` and ``dragoman demo``: the commands that need an engine.

vLLM is imported only when one of them runs, so ``dragoman submit`` stays light.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from contract.log_format import LOG_FORMATS, configure_logging
from contract.settings import Settings
from worker.engine import EngineOptions

if TYPE_CHECKING:
    from worker.service import Worker


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the engine commands on the ``dragoman`` parser."""
    worker = sub.add_parser("worker", help="run a worker: one engine fed continuously from the stream")
    add_engine_arguments(worker)
    worker.add_argument("--max-in-flight", type=int, help="jobs inside the engine (default 2 x max-num-seqs)")
    worker.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    worker.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text, or json (one object per line); default DRAGOMAN_LOG_FORMAT or text",
    )
    worker.set_defaults(func=cmd_worker)

    model = sub.add_parser("model", help="the default model")
    model.add_argument("action", choices=["prepare", "path"])
    model.set_defaults(func=cmd_model)

    demo = sub.add_parser("demo", help="services, model, worker, a few translations, then stop")
    demo.set_defaults(func=cmd_demo)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """vLLM options passed through to the engine (defaults suit a CPU-only machine)."""
    defaults = EngineOptions()
    parser.add_argument("--model", help="model folder (default: the prepared Gemma 3 270M)")
    parser.add_argument("--profile", help="prompt profile: few-shot, chat (default: from the model)")
    parser.add_argument("--max-num-seqs", type=int, default=defaults.max_num_seqs)
    parser.add_argument("--max-num-batched-tokens", type=int, default=defaults.max_num_batched_tokens)
    parser.add_argument("--max-model-len", type=int, default=defaults.max_model_len)
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=defaults.gpu_memory_utilization,
        help="GPU memory fraction (on a CPU: fraction of RAM for the KV cache)",
    )
    parser.add_argument("--dtype", default=defaults.dtype)
    parser.add_argument("--tensor-parallel-size", type=int, default=defaults.tensor_parallel_size)
    parser.add_argument(
        "--enforce-eager",
        action=argparse.BooleanOptionalAction,
        default=defaults.enforce_eager,
        help="skip compilation and graph capture (fast start; default on)",
    )
    parser.add_argument(
        "--max-cudagraph-capture-size",
        type=_tokens_or_zero,
        default=defaults.max_cudagraph_capture_size,
        help="largest engine step (tokens) run from a CUDA graph, with --no-enforce-eager "
        f"(default {defaults.max_cudagraph_capture_size}; 0: vLLM's own default)",
    )
    parser.add_argument("--load-format", default=defaults.load_format, help="auto, safetensors, dummy, ...")
    parser.add_argument(
        "--log-stats",
        action=argparse.BooleanOptionalAction,
        default=defaults.log_stats,
        help="vLLM engine metrics on /metrics and its throughput log line (default on)",
    )


def _tokens_or_zero(value: str) -> int:
    """A token count for the command line: a whole number, 0 or more (argparse shows the error)."""
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens, got {value!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (vLLM's default) or a positive number of tokens, got {count}")
    return count


def engine_options(args: argparse.Namespace) -> EngineOptions:
    """The :class:`EngineOptions` the parsed arguments describe."""
    return EngineOptions(
        model=args.model,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        dtype=args.dtype,
        tensor_parallel_size=args.tensor_parallel_size,
        enforce_eager=args.enforce_eager,
        max_cudagraph_capture_size=args.max_cudagraph_capture_size or None,
        load_format=args.load_format,
        log_stats=args.log_stats,
    )


def resolve_model(settings: Settings, model: str | None) -> Path:
    """The model folder to serve: the one given, else the default model (prepared if needed)."""
    from worker.model import prepare_default_model
    from worker.vllm_engine import check_model_path

    if model is None:
        return prepare_default_model(settings.model_cache_dir)
    path = Path(model).expanduser()
    check_model_path(path)
    return path


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Start services if needed, migrate, build the engine, process jobs until SIGTERM/SIGINT."""
    from prometheus_client import REGISTRY

    from contract.services import ensure_services, redact_url
    from storage import upgrade_database
    from worker.metrics import WorkerMetrics
    from worker.profiles import choose_profile
    from worker.runtime import freeze_startup_heap, run_event_loop
    from worker.service import Worker
    from worker.vllm_engine import VllmEngine

    configure_logging(args.log_level, args.log_format or settings.log_format)
    log = logging.getLogger("dragoman.worker")
    options = engine_options(args)
    model_path = resolve_model(settings, options.model)
    urls = ensure_services(settings)
    log.info("redis %s, postgres %s", redact_url(urls.redis_url), redact_url(urls.database_url))
    upgrade_database(urls.database_url)
    log.info("starting engine for %s", model_path)
    engine = VllmEngine.start(model_path, options)
    try:
        profile = choose_profile(args.profile, model_path, engine.tokenizer)
        log.info(
            "engine ready: %s, profile %s, context %d tokens", engine.model_name, profile.name, engine.max_model_len
        )
        worker = Worker(
            settings,
            redis_url=urls.redis_url,
            database_url=urls.database_url,
            engine=engine,
            profile=profile,
            max_in_flight=args.max_in_flight or settings.max_in_flight or 2 * options.max_num_seqs,
            metrics=WorkerMetrics(REGISTRY),  # vLLM's engine metrics are registered there too
        )
        freeze_startup_heap()
        return run_event_loop(_serve_until_signalled(worker))
    finally:
        engine.shutdown()


async def _serve_until_signalled(worker: Worker) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await worker.serve(stop)


def cmd_model(args: argparse.Namespace, settings: Settings) -> int:
    """Prepare the default model (once) or print where it is."""
    from worker.model import default_model_path, is_prepared, prepare_default_model

    if args.action == "path":
        path = default_model_path(settings.model_cache_dir)
        print(path)
        return 0 if is_prepared(settings.model_cache_dir) else 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(prepare_default_model(settings.model_cache_dir))
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """The whole path on this machine, with the real engine and the default model."""
    from cli.demo import run_demo

    return run_demo(settings, sys.executable)
