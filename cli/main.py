"""The ``dragoman`` command line.

Exit codes: 0 ok, 1 any other error, 2 bad input (a missing engine extra included), 3 not found.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import redis

from cli.api import add_commands as add_api_commands
from cli.bulk import add_commands as add_bulk_commands
from cli.evaluate import add_commands as add_evaluate_commands
from cli.glossary_option import parse_glossary_option
from cli.help import EXAMPLE_ID, MODEL_HELP, HelpFormatter, add_command, choices, examples
from cli.memory import add_commands as add_memory_commands
from cli.orchestrator import add_commands as add_orchestrator_commands
from cli.served_models import add_commands as add_served_models_commands
from cli.setting_flags import overlay_flags
from cli.usage import add_commands as add_usage_commands
from cli.worker import add_commands as add_worker_commands
from contract.errors import (
    DragomanError,
    EngineNotInstalledError,
    InvalidJobError,
    JobNotFoundError,
)
from contract.models import ModelRouter
from contract.schemas import Job, JobStatus
from contract.settings import Settings
from contract.version import dragoman_version
from contract.wording import counted
from storage.api_keys import ApiKeyNotFoundError

if TYPE_CHECKING:
    from storage.embedded_cluster import EmbeddedCluster

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_NOT_FOUND = 0, 1, 2, 3

Command = Callable[[argparse.Namespace, Settings], int]


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    """Enqueue one job from the argument or stdin; print its id (or its result with --wait)."""
    from producer.client import Client

    text = args.text if args.text is not None else sys.stdin.read()
    metadata = _parse_metadata(args.metadata)
    with Client(settings) as client:
        job_id = client.submit(
            text,
            args.source,
            args.target,
            metadata=metadata,
            idempotency_key=args.idempotency_key,
            glossary=parse_glossary_option(args.glossary),
            context=args.context,
            formality=args.formality,
            memory=not args.no_memory,
            model=args.model,
        )
        if not args.wait:
            print(job_id)
            return EXIT_OK
        job = client.wait(job_id, timeout=args.timeout)
    if args.json:
        print(job.model_dump_json(indent=2))
    elif job.status is JobStatus.SUCCEEDED:
        print(job.translation)
    else:
        print(f"job {job.id} {job.status.value}: {job.error or ''}".rstrip(), file=sys.stderr)
    return EXIT_OK if job.status is JobStatus.SUCCEEDED else EXIT_ERROR


def _parse_metadata(raw: str | None) -> dict[str, object] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidJobError(f"--metadata must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidJobError('--metadata must be a JSON object, e.g. \'{"doc": "a.txt"}\'')
    return value


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    """Show a job by id, human-readable or as JSON."""
    from producer.client import Client

    with Client(settings) as client:
        job = client.get(args.job_id)
    print(job.model_dump_json(indent=2) if args.json else format_job(job))
    return EXIT_OK


_TAG_MEANING = {
    "kept": " (the translation kept the segment's placeholder tags)",
    "retried": " (kept on the one retry)",
    "fallback": " (lost twice: the text between the tags was translated on its own)",
}
_FINISH_MEANING = {
    "stop": " (the model finished the translation)",
    "length": " (the output budget ran out: the translation was cut off)",
    "repetition": " (the output fell into a loop, also on its sampled retry: degenerate output)",
    "abort": " (cancelled while running)",
}


def _quality_lines(flags: dict[str, str]) -> list[str]:
    """The quality checks' outcome: "clean", or one line per flag with its evidence."""
    if not flags:
        return ["quality      clean (every quality check passed)"]
    return [f"{'quality' if i == 0 else '':<12} {flag}: {evidence}" for i, (flag, evidence) in enumerate(flags.items())]


def format_job(job: Job) -> str:
    """A job as a few aligned lines for a terminal."""
    lines = [
        f"job          {job.id}",
        f"status       {job.status.value}",
        f"languages    {job.source_lang} -> {job.target_lang}"
        + (f" (detected {job.detected_source_lang})" if job.detected_source_lang else ""),
        f"attempts     {job.attempts}",
    ]
    if job.created_at:
        lines.append(f"created      {job.created_at.isoformat(timespec='milliseconds')}")
    for label, seconds in (("queued for", job.queue_seconds), ("ran for", job.run_seconds)):
        if seconds is not None:
            lines.append(f"{label:<12} {seconds:.3f} s")
    if job.model:
        lines.append(f"model        {job.model}")
    if job.output_tokens is not None:
        lines.append(f"tokens       {job.prompt_tokens} prompt, {job.output_tokens} output")
    if job.finish_reason is not None:
        lines.append(f"finished by  {job.finish_reason}{_FINISH_MEANING.get(job.finish_reason, '')}")
    if job.pieces is not None:
        lines.append(f"pieces       {job.pieces}{' (a long text, translated in pieces)' if job.pieces > 1 else ''}")
    if job.from_memory:
        lines.append("memory       served from the translation memory (nothing generated)")
    if job.glossary_misses:
        lines.append(f"glossary     target terms missing for: {', '.join(job.glossary_misses)}")
    if job.inline_tags is not None:
        lines.append(f"inline tags  {job.inline_tags}{_TAG_MEANING.get(job.inline_tags, '')}")
    if job.quality_flags is not None:
        lines += _quality_lines(job.quality_flags)
    if job.error:
        lines.append(f"error        {job.error}")
    if job.translation is not None:
        lines.append(f"translation  {job.translation}")
    return "\n".join(lines)


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    """Cancel a queued job."""
    from producer.client import Client

    with Client(settings) as client:
        job = client.cancel(args.job_id)
    print(f"job {job.id} {job.status.value}")
    return EXIT_OK


def cmd_services(args: argparse.Namespace, settings: Settings) -> int:
    """Start, stop or show the embedded Redis and PostgreSQL, or say which configured URLs are used instead.

    Every other command uses ``DRAGOMAN_REDIS_URL``/``DRAGOMAN_DATABASE_URL`` when they are set, so
    ``up`` prints the URLs those commands will use: with both set it starts nothing. ``up --cluster``
    starts a local Redis Cluster beside them (``storage.embedded_cluster``) and prints its URL instead.
    """
    from contract.services import redact_url
    from storage.embedded import EmbeddedServices, ensure_services
    from storage.embedded_cluster import services_cluster

    services = EmbeddedServices(settings.data_dir)
    cluster = services_cluster(settings.data_dir)
    urls = (("DRAGOMAN_REDIS_URL", settings.redis_url), ("DRAGOMAN_DATABASE_URL", settings.database_url))
    configured = [name for name, value in urls if value]
    if args.action == "up" and args.cluster:
        return _services_up_cluster(settings, cluster)
    if args.action == "up":
        used = ensure_services(settings)
        if len(configured) == 2:
            print("both URLs are configured: no embedded server started", file=sys.stderr)
        elif configured:
            print(
                f"{configured[0]} is configured and used; the embedded servers in {services.data_dir} serve the other",
                file=sys.stderr,
            )
        print(f"DRAGOMAN_REDIS_URL={redact_url(used.redis_url)}")
        print(f"DRAGOMAN_DATABASE_URL={redact_url(used.database_url)}")
        return EXIT_OK
    if args.action == "down":
        stopped_cluster = cluster.down()
        stopped = services.down() or stopped_cluster
        print("stopped" if stopped else f"no embedded services were running in {services.data_dir}")
        return EXIT_OK
    if cluster.ports:  # `up --cluster` made one here: it is what the exported URL names
        _print_cluster_status(cluster)
    if len(configured) == 2:
        print("both URLs are configured (the embedded servers are not used):", file=sys.stderr)
        print(f"DRAGOMAN_REDIS_URL={redact_url(settings.redis_url or '')}")
        print(f"DRAGOMAN_DATABASE_URL={redact_url(settings.database_url or '')}")
        return EXIT_OK
    running = services.running_urls()
    if running is None:
        print(f"not running (data directory {services.data_dir})")
        return EXIT_ERROR
    print(f"DRAGOMAN_REDIS_URL={redact_url(settings.redis_url or running.redis_url)}")
    print(f"DRAGOMAN_DATABASE_URL={redact_url(settings.database_url or running.database_url)}")
    return EXIT_OK


def _services_up_cluster(settings: Settings, cluster: EmbeddedCluster) -> int:
    """``services up --cluster``: the single embedded Redis (the orchestration queue: RQ cannot run on a
    cluster), PostgreSQL unless configured, and the cluster, whose URL and shard count it prints."""
    from contract.services import redact_url
    from storage.embedded import ensure_services

    if settings.redis_url and settings.redis_url != cluster.url_if_created():
        print(
            f"DRAGOMAN_REDIS_URL is set to {redact_url(settings.redis_url)}: the other commands use it "
            "until you export the URL below",
            file=sys.stderr,
        )
    single = ensure_services(settings.model_copy(update={"redis_url": None}))
    cluster_url = cluster.up()
    print(f"DRAGOMAN_REDIS_URL={cluster_url}")
    print(f"DRAGOMAN_REDIS_SHARDS={cluster.recommended_shards}")
    print(f"DRAGOMAN_ORCHESTRATION_REDIS_URL={redact_url(single.redis_url)}")
    print(f"DRAGOMAN_DATABASE_URL={redact_url(single.database_url)}")
    return EXIT_OK


def _print_cluster_status(cluster: EmbeddedCluster) -> None:
    """``services status``'s lines about the embedded Redis Cluster (on stderr: stdout stays the URLs in use)."""
    nodes = cluster.nodes()
    state = "running" if cluster.running() else "not running (`dragoman services up --cluster` starts it)"
    print(f"embedded Redis Cluster in {cluster.data_dir}: {state}", file=sys.stderr)
    for node in nodes:
        slots = " ".join(f"{first}-{last}" for first, last in node.slots)
        print(f"  127.0.0.1:{node.port}  {node.role:<8} pid {node.pid or '-'}  {slots}".rstrip(), file=sys.stderr)
    print(
        f"  DRAGOMAN_REDIS_URL={cluster.url} DRAGOMAN_REDIS_SHARDS={cluster.recommended_shards}",
        file=sys.stderr,
    )


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    """Run the Alembic migrations up (or down), or keep the jobs table's daily partitions (retention)."""
    from storage import downgrade_database, upgrade_database
    from storage.embedded import resolve_urls

    url = resolve_urls(settings).database_url
    if args.action == "retention":
        return _db_retention(url, settings.retention_days, dry_run=args.dry_run)
    if args.action == "upgrade":
        upgrade_database(url, args.revision or "head")
    else:
        downgrade_database(url, args.revision or "base")
    print(f"database {args.action}d to {args.revision or ('head' if args.action == 'upgrade' else 'base')}")
    return EXIT_OK


def _db_retention(url: str, retention_days: int | None, *, dry_run: bool) -> int:
    """Create the coming days' jobs partitions, drop those past DRAGOMAN_RETENTION_DAYS; print both."""
    from contract.sync_bridge import run_sync
    from storage.partitions import run_maintenance

    report = run_sync(run_maintenance(url, retention_days, dry_run=dry_run))
    verb = "would " if dry_run else ""
    for name in report.created:
        print(f"{verb}create  {name}")
    for name in report.dropped:
        print(f"{verb}drop    {name}")
    if retention_days is None:
        print("DRAGOMAN_RETENTION_DAYS is not set: every day's jobs are kept")
    elif not report.dropped:
        print(f"no jobs partition is older than {retention_days} days")
    return EXIT_OK


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 if Redis, PostgreSQL and the worker are healthy, 1 otherwise (for container health checks)."""
    from cli.check import check_health

    report = check_health(settings, args.consumer, require_worker=not args.services_only)
    layout = f" ({report.redis_layout})" if report.redis_layout else ""
    redis_state = "ok" if report.redis_ok else "DEGRADED" if report.redis_layout else "UNREACHABLE"
    print(f"redis       {redis_state}{layout}")
    print(f"postgres    {'ok' if report.postgres_ok else 'UNREACHABLE'}")
    for worker in [] if args.services_only else report.workers:
        print(
            f"worker      {worker.name}: {worker.in_flight} in flight, {worker.written} written, "
            f"{worker.reclaimed} reclaimed"
        )
    for problem in report.problems:
        print(f"problem     {problem}", file=sys.stderr)
    print("healthy" if report.healthy else "unhealthy")
    return EXIT_OK if report.healthy else EXIT_ERROR


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    """Print the queue's length, lag, pending work, throughput and dead letters (``--watch`` refreshes)."""
    import asyncio

    from broker.keys import RedisKeys
    from cli.stats_view import show_queue_stats
    from storage.embedded import resolve_urls

    if args.watch is not None and args.watch <= 0:
        raise InvalidJobError("--watch takes a positive number of seconds")
    redis_url = settings.redis_url or resolve_urls(settings).redis_url
    try:
        asyncio.run(
            show_queue_stats(
                redis_url,
                RedisKeys.from_settings(settings),
                as_json=args.json,
                watch_seconds=args.watch,
                models=ModelRouter(settings.default_model, settings.model_routes).configured,
            )
        )
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def cmd_dead(args: argparse.Namespace, settings: Settings) -> int:
    """List, retry or purge dead-lettered jobs."""
    from contract.sync_bridge import run_sync
    from storage.embedded import resolve_urls

    if args.action == "retry" and not args.ident:
        raise InvalidJobError("dead retry needs a dead-letter id or a job id")
    return run_sync(_dead(args, settings, resolve_urls(settings).redis_url))


async def _dead(args: argparse.Namespace, settings: Settings, redis_url: str) -> int:
    """``cmd_dead``'s work, on the async dead-letter operations and one connection it closes."""
    from broker.dead_letters import DeadLetters
    from broker.redis_client import open_redis

    connection = open_redis(redis_url)
    dead = DeadLetters(connection, settings)
    try:
        if args.action == "list":
            entries = await dead.entries(args.count)
            for entry in entries:
                print(f"{entry.ident}  job {entry.job_id or '-'}  {entry.reason}")
            print(f"{counted(len(entries), 'dead letter')} shown")
        elif args.action == "retry":
            print(f"job {await dead.retry(args.ident)} queued again")  # on the dead letter's shard
        else:
            print(f"purged {counted(await dead.purge(), 'dead letter')}")
    finally:
        await connection.aclose()
    return EXIT_OK


MAIN_EXAMPLES = examples(
    "dragoman worker > worker.log 2>&1 &",
    'dragoman submit "Good morning." --from en --to fr --wait',
    "dragoman translate notes.md --from en --to de",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``dragoman`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="dragoman",
        description=inspect.cleandoc("""Queue-driven batch translation on one continuously fed vLLM engine.

        Start a worker (it needs an engine extra: pip install 'dragoman[cpu]' or 'dragoman[gpu]'), then submit
        jobs, runs or whole documents from anywhere that reaches the same Redis and PostgreSQL. `dragoman
        COMMAND --help` describes each command.

        Exit codes: 0 ok, 1 error (including a job that failed), 2 bad input (or no engine installed), 3 not
        found."""),
        epilog=MAIN_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"dragoman {dragoman_version()}", help="print the version and exit"
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", title="commands", help="`dragoman COMMAND --help` for more"
    )

    submit = add_command(
        sub,
        "submit",
        help="enqueue a translation (text argument or stdin)",
        description="Enqueue one translation job and print its id; with --wait, wait for it and print the "
        "translation (exit 1 if the job failed).",
        epilog=examples(
            'dragoman submit "Good morning." --from en --to fr',
            'dragoman submit "The cat sleeps." --from auto --to fr --glossary \'{"cat": "chat"}\' --wait',
            "echo 'Guten Tag.' | dragoman submit --from de --to en --wait",
        ),
    )
    submit.add_argument("text", nargs="?", help="text to translate (default: read stdin)")
    submit.add_argument("--from", dest="source", required=True, help="source language, e.g. en (auto: detect it)")
    submit.add_argument("--to", dest="target", required=True, help="target language, e.g. fr")
    submit.add_argument("--metadata", help="JSON object stored with the job")
    submit.add_argument("--idempotency-key", help="submitting the same key again returns the same job")
    submit.add_argument(
        "--glossary", help='JSON object of source term -> target term, or @FILE holding one: \'{"cat": "chat"}\''
    )
    submit.add_argument("--context", help="surrounding text the model sees but does not translate")
    submit.add_argument("--formality", choices=["formal", "informal"], help="register, where the profile has one")
    submit.add_argument("--no-memory", action="store_true", help="neither served from nor stored in the memory")
    submit.add_argument("--model", help=MODEL_HELP)
    submit.add_argument("--wait", action="store_true", help="wait for the result and print it")
    submit.add_argument("--timeout", type=float, default=300.0, help="seconds --wait waits (default 300)")
    submit.add_argument("--json", action="store_true", help="with --wait, print the whole job as JSON")
    submit.set_defaults(func=cmd_submit)

    status = add_command(
        sub,
        "status",
        help="show a job by id",
        description="Show a job: status, languages, attempts, timings, tokens, and its translation or error. "
        "Exit 3 if no job has this id.",
        epilog=examples(f"dragoman status {EXAMPLE_ID}", f"dragoman status {EXAMPLE_ID} --json"),
    )
    status.add_argument("job_id", help="the job id that submit printed")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)

    cancel = add_command(
        sub,
        "cancel",
        help="cancel a queued job, or abort a running one",
        description=inspect.cleandoc("""Cancel a job and print its status.

        A queued job is cancelled at once: no worker will run it. A running job is aborted in the engine by
        the worker running it, then recorded as cancelled (it shows as running until then, and may finish
        first). A cancel is final. A job that already succeeded or failed cannot be cancelled (exit 1);
        cancelling a cancelled job does nothing. Exit 3 if no job has this id."""),
        epilog=examples(f"dragoman cancel {EXAMPLE_ID}"),
    )
    cancel.add_argument("job_id", help="the job id that submit printed")
    cancel.set_defaults(func=cmd_cancel)

    services = add_command(
        sub,
        "services",
        help="embedded Redis and PostgreSQL under DRAGOMAN_DATA_DIR",
        description=choices(
            "Embedded Redis and PostgreSQL for one machine, kept in DRAGOMAN_DATA_DIR (default .dragoman).",
            (
                "up",
                "start them (if not running) and print the URLs every command uses; with DRAGOMAN_REDIS_URL "
                "and DRAGOMAN_DATABASE_URL both set it starts nothing and prints those",
            ),
            ("down", "stop them (their data is kept)"),
            ("status", "print the URLs every command uses, or exit 1 if the embedded ones are needed and not running"),
        ),
        epilog=examples("dragoman services up", "dragoman services down"),
    )
    services.add_argument("action", choices=["up", "down", "status"], help="up, down or status (see above)")
    services.add_argument(
        "--cluster",
        action="store_true",
        help="with up: also start a local Redis Cluster (3 primaries, 3 replicas) "
        "under DRAGOMAN_DATA_DIR/redis-cluster "
        "and print its DRAGOMAN_REDIS_URL and DRAGOMAN_REDIS_SHARDS, with the single embedded Redis as "
        "DRAGOMAN_ORCHESTRATION_REDIS_URL (down and status include the cluster whenever one was started)",
    )
    services.set_defaults(func=cmd_services)

    db = add_command(
        sub,
        "db",
        help="database migrations and the jobs table's retention",
        description="Run the Alembic migrations on DRAGOMAN_DATABASE_URL (or the embedded PostgreSQL). "
        "The worker upgrades on start too. 'retention' creates the jobs table's partitions of the coming "
        "days and drops the days older than DRAGOMAN_RETENTION_DAYS (whole partitions; the orchestrator's "
        "sweeper does the same once an hour).",
        epilog=examples(
            "dragoman db upgrade",
            "dragoman db downgrade --revision 0002",
            "dragoman db retention --dry-run",
        ),
    )
    db.add_argument(
        "action",
        choices=["upgrade", "downgrade", "retention"],
        help="upgrade (to head), downgrade (to base), or retention (create and drop jobs partitions)",
    )
    db.add_argument("--revision", help="target revision (default: head / base)")
    db.add_argument("--dry-run", action="store_true", help="retention: print what would be created and dropped only")
    db.set_defaults(func=cmd_db)

    check = add_command(
        sub,
        "check",
        help="health check: exit 0 if Redis, PostgreSQL and the worker are fine",
        description="Check Redis, PostgreSQL and this host's worker (its heartbeat); exit 0 if all are fine, "
        "1 otherwise. Meant for a container health check.",
        epilog=examples("dragoman check", "dragoman check --services-only"),
    )
    check.add_argument("--consumer", help="the worker's consumer name (default: any worker on this host)")
    check.add_argument("--services-only", action="store_true", help="check Redis and PostgreSQL only")
    check.set_defaults(func=cmd_check)

    stats = add_command(
        sub,
        "stats",
        help="the queue: length, lag, pending per consumer, jobs/s, dead letters (and per shard, with several)",
        epilog=examples("dragoman stats", "dragoman stats --watch 5"),
    )
    stats.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        metavar="SECONDS",
        help="refresh every SECONDS (default 2) until Ctrl-C",
    )
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(func=cmd_stats)

    dead = add_command(
        sub,
        "dead",
        help="dead-lettered jobs: list, retry ID, purge",
        description=choices(
            "Dead letters: jobs failed for good, and entries that could not be read, copied to the dead-letter stream.",
            ("list", "show the dead letters with their reasons (the oldest --count of them, of every shard)"),
            (
                "retry ID",
                "queue a dead-lettered job again by entry id or job id (same job id, attempts reset) on its shard's "
                "lane; with several shards an entry id may be written SHARD/ID, as list shows it",
            ),
            ("purge", "drop every dead letter of every shard (the jobs' rows in PostgreSQL stay)"),
        ),
        epilog=examples("dragoman dead list --count 20", f"dragoman dead retry {EXAMPLE_ID}", "dragoman dead purge"),
    )
    dead.add_argument("action", choices=["list", "retry", "purge"], help="list, retry or purge (see above)")
    dead.add_argument(
        "ident", nargs="?", help="for retry: the dead-letter entry id ([SHARD/]ID, as list shows it) or the job id"
    )
    dead.add_argument("--count", type=int, default=100, help="for list: how many (default 100)")
    dead.set_defaults(func=cmd_dead)

    add_api_commands(sub)
    add_bulk_commands(sub)
    add_evaluate_commands(sub)
    add_memory_commands(sub)
    add_served_models_commands(sub)
    add_orchestrator_commands(sub)
    add_worker_commands(sub)
    add_usage_commands(sub)
    return parser


def parse_command_line(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line. A command that passes unknown options through (``dragoman worker``: vLLM's
    engine arguments) gets them in ``engine_args``, in order; any other command refuses them (exit 2)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if not hasattr(args, "engine_args"):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.engine_args = unknown
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dragoman`` console script."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # Whoever read our output stopped reading (``dragoman worker --help-engine | head``): that is
        # their choice, not our error. Later writes (interpreter shutdown's flush) go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    args = parse_command_line(argv)
    try:
        settings = overlay_flags(Settings(), args)  # flag > environment > settings file > default
        command: Command = args.func
        return command(args, settings)
    except (InvalidJobError, EngineNotInstalledError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (JobNotFoundError, ApiKeyNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except DragomanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except redis.ConnectionError as exc:
        print(f"error: cannot reach Redis: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
