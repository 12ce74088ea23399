"""``dragoman rq-worker``: the orchestration worker (RQ tasks plus the completion dispatcher)."""

from __future__ import annotations

import argparse
import threading

from contract.log_format import LOG_FORMATS, configure_logging
from contract.settings import Settings


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rq-worker`` on the ``dragoman`` parser."""
    worker = sub.add_parser("rq-worker", help="the orchestration worker: splits documents, assembles them, webhooks")
    worker.add_argument("--burst", action="store_true", help="run what is queued, then exit (for scripts and tests)")
    worker.add_argument("--log-format", choices=LOG_FORMATS, help="text or json (default DRAGOMAN_LOG_FORMAT)")
    worker.set_defaults(func=cmd_rq_worker)


def cmd_rq_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Run RQ's worker on the orchestration queue with the completion dispatcher beside it."""
    from rq import Queue, SimpleWorker

    from orchestrator.context import TaskContext
    from orchestrator.dispatcher import CompletionDispatcher

    configure_logging("INFO", args.log_format or settings.log_format)
    ctx = TaskContext.from_environment()
    dispatcher = CompletionDispatcher(ctx)
    dispatcher.ensure_group()
    if args.burst:
        dispatcher.dispatch_once()
    thread = threading.Thread(target=dispatcher.run, name="dragoman-dispatcher", daemon=True)
    if not args.burst:
        thread.start()
    connection = ctx.rq_connection()
    try:
        queue = Queue(ctx.keys.orchestration_queue, connection=connection)
        # SimpleWorker runs tasks in this process: they are short, and the dispatcher thread stays put.
        SimpleWorker([queue], connection=connection).work(burst=args.burst, with_scheduler=not args.burst)
    finally:
        dispatcher.stop()
        if thread.is_alive():
            thread.join(timeout=5)
        dispatcher.close()
        connection.close()
    return 0
