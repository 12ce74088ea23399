"""``dragoman rq-worker``: the orchestration worker (RQ tasks plus the completion dispatcher).

Webhook deliveries have a queue of their own, worked by a process of their own: a receiver that
is slow (up to ``DRAGOMAN_WEBHOOK_TIMEOUT_SECONDS`` per delivery) never holds up a document's
assembly or a run's finish. By default ``dragoman rq-worker`` runs both: the orchestration queue
in this process and ``dragoman rq-worker --queue webhooks`` as its child, stopped with it. That
child delivers ``DRAGOMAN_WEBHOOK_WORKERS`` webhooks at once (RQ's ``WorkerPool``: one RQ worker per
delivery, forked from it), and a tenant's deliveries take at most
``DRAGOMAN_WEBHOOK_TENANT_CONCURRENCY`` of them (``broker/orchestration.py``), so a receiver that
never answers holds up only its own tenant's webhooks.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from cli.help import SubParsers, add_command, examples
from cli.setting_flags import mirror_settings
from contract.log_format import LOG_FORMATS, configure_logging
from contract.services import redact_url
from contract.settings import Settings

if TYPE_CHECKING:
    from orchestrator.context import TaskContext

log = logging.getLogger(__name__)

QUEUE_CHOICES = ("all", "orchestration", "webhooks")
_CHILD_STOP_TIMEOUT_S = 60.0


def add_commands(sub: SubParsers) -> None:
    """Register ``rq-worker`` on the ``dragoman`` parser."""
    worker = add_command(
        sub,
        "rq-worker",
        help="the orchestration worker: splits documents, assembles them, webhooks",
        description="The orchestration worker that runs and documents need next to `dragoman worker`: it splits "
        "documents, assembles them, finishes runs and delivers webhooks (in a child process of its own). "
        "Stops on SIGTERM or Ctrl-C.",
        epilog=examples("dragoman rq-worker > rq-worker.log 2>&1 &", "dragoman rq-worker --burst"),
    )
    worker.add_argument("--burst", action="store_true", help="run what is queued, then exit (for scripts and tests)")
    worker.add_argument(
        "--queue",
        choices=QUEUE_CHOICES,
        default="all",
        help="all (default): orchestration here, webhook deliveries in a child process (DRAGOMAN_WEBHOOK_WORKERS "
        "at once); orchestration or webhooks: only that queue (more webhook workers deliver to more slow receivers "
        "at once)",
    )
    worker.add_argument("--log-format", choices=LOG_FORMATS, help="text or json (default DRAGOMAN_LOG_FORMAT)")
    worker.add_argument(
        "--parent-pid",
        type=int,
        metavar="PID",
        help="with --queue webhooks: stop once process PID is gone (the rq-worker that started this one passes it)",
    )
    mirror_settings(worker, "log_format")
    worker.set_defaults(func=cmd_rq_worker)


def cmd_rq_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Run RQ's worker on the chosen queues; the orchestration queue gets the dispatcher and sweeper beside it.

    Exits 1 if the completion dispatcher or the sweeper cannot go on (or the webhook child
    died), so that the supervisor restarts a process that would otherwise finish nothing.
    """
    from orchestrator.context import TaskContext

    log_format = settings.log_format
    configure_logging("INFO", log_format)
    ctx = TaskContext.from_environment()  # a Redis Cluster without DRAGOMAN_ORCHESTRATION_REDIS_URL fails here
    keys = ctx.keys
    log.info(
        "jobs on %s (%d shards), RQ queues on %s",
        redact_url(ctx.redis_url),
        keys.shard_count,
        redact_url(ctx.orchestration_redis_url),
    )
    gave_up = threading.Event()
    if args.queue == "webhooks":
        if args.parent_pid is not None:
            _stop_when_orphaned(args.parent_pid)
        _deliver(ctx, burst=args.burst)
        return 0
    if args.burst:  # scripts and tests: every queue in turn, in this process
        both = args.queue == "all"
        _orchestrate(ctx, [keys.orchestration_queue, *([keys.webhook_queue] if both else [])], True, gave_up)
        return 0
    if args.queue == "orchestration":
        _orchestrate(ctx, [keys.orchestration_queue], False, gave_up)
        return 1 if gave_up.is_set() else 0
    deliveries = _WebhookProcess(log_format)

    def stop_while_starting(signum: int, frame: object) -> None:
        """SIGTERM before RQ has put its own handler in place (a warm shutdown from then on)."""
        raise SystemExit(1 if deliveries.died or gave_up.is_set() else 0)

    signal.signal(signal.SIGTERM, stop_while_starting)
    try:
        _orchestrate(ctx, [keys.orchestration_queue], False, gave_up)
    finally:
        deliveries.stop()
    return 1 if deliveries.died or gave_up.is_set() else 0


def _orchestrate(ctx: TaskContext, queue_names: list[str], burst: bool, gave_up: threading.Event) -> None:
    """The completion dispatcher and the sweeper on threads of their own, RQ's worker on ``queue_names`` here.

    If either loop cannot go on it sets ``gave_up`` and sends this process SIGTERM: RQ finishes
    the task under way and returns, and the command exits 1.
    """
    from orchestrator.background import BackgroundLoop
    from orchestrator.dispatcher import CompletionDispatcher
    from orchestrator.sweeper import GroupSweeper

    dispatcher = CompletionDispatcher(ctx)
    dispatcher.ensure_group()
    sweeper = GroupSweeper(ctx)

    def stop_process(exc: BaseException) -> None:
        gave_up.set()
        os.kill(os.getpid(), signal.SIGTERM)

    loops = [
        BackgroundLoop("dragoman-dispatcher", dispatcher.step, interval=0, on_fatal=stop_process),
        BackgroundLoop(
            "dragoman-sweeper", sweeper.sweep_once, interval=ctx.settings.sweep_interval_seconds, on_fatal=stop_process
        ),
    ]
    if burst:
        dispatcher.dispatch_once()
        sweeper.sweep_once()
    else:
        for loop in loops:
            loop.start()
    try:
        _work(ctx, queue_names, burst=burst)
    finally:
        for loop in loops:
            loop.stop()
        dispatcher.close()


def _stop_when_orphaned(parent_pid: int, interval_s: float = 1.0) -> threading.Thread:
    """SIGTERM this process (RQ's warm shutdown) once ``parent_pid`` is no longer its parent.

    The webhook child has a session of its own, so a parent killed outright (SIGKILL, a crash) takes
    nothing of it along: without this it would go on working the queue for nobody, for ever.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        log.warning("the rq-worker that started this webhook worker (pid %s) is gone; stopping", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=watch, name="dragoman-parent-watch", daemon=True)
    watcher.start()
    return watcher


def _work(ctx: TaskContext, queue_names: list[str], *, burst: bool) -> None:
    from rq import Queue

    from orchestrator.task_worker import TaskWorker

    connection = ctx.rq_connection()
    try:
        queues = [Queue(name, connection=connection) for name in queue_names]
        # RQ's SimpleWorker runs tasks in this process: they are short, and the dispatcher thread stays put.
        TaskWorker(queues, connection=connection).work(burst=burst, with_scheduler=not burst)
    finally:
        connection.close()


def _deliver(ctx: TaskContext, *, burst: bool) -> None:
    """Work the webhook queue with ``DRAGOMAN_WEBHOOK_WORKERS`` RQ workers: that many deliveries at once.

    One worker runs here; more are RQ's ``WorkerPool`` of processes forked from this one (restarted if one
    dies, stopped by this process's SIGTERM: they finish the delivery under way, bounded by its deadline).
    They are in this process's group, so the rq-worker that started it takes them along if it dies.
    """
    workers = ctx.settings.webhook_workers
    if workers <= 1:
        _work(ctx, [ctx.keys.webhook_queue], burst=burst)
        return
    from rq.worker_pool import WorkerPool

    from orchestrator.task_worker import TaskWorker

    class DeliveryWorker(TaskWorker):
        """One of the pool's workers: it stops once the process that forked it is gone (killed outright, say)."""

        def work(self, *args: Any, **kwargs: Any) -> bool:
            """RQ's work loop, watched from a thread for its pool's end."""
            _stop_when_orphaned(os.getppid())
            return bool(super().work(*args, **kwargs))

    connection = ctx.rq_connection()
    try:
        pool = WorkerPool([ctx.keys.webhook_queue], connection, num_workers=workers, worker_class=DeliveryWorker)
        pool.start(burst=burst)
    finally:
        connection.close()


class _WebhookProcess:
    """``dragoman rq-worker --queue webhooks`` as a child: started now, stopped by :meth:`stop`.

    If it dies on its own, this process is asked to stop too (exit code 1), so that whatever
    supervises it (compose, Kubernetes) restarts both rather than leaving deliveries undone.
    """

    def __init__(self, log_format: str) -> None:
        command = [sys.executable, "-m", "cli.main", "rq-worker", "--queue", "webhooks", "--log-format", log_format]
        command += ["--parent-pid", str(os.getpid())]
        # A session of its own: a terminal's Ctrl-C reaches only the parent, which stops the child in order.
        self._process = subprocess.Popen(command, start_new_session=True)
        self._stopping = threading.Event()
        self.died = False
        self._watcher = threading.Thread(target=self._watch, name="dragoman-webhook-watch", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        code = self._process.wait()
        if not self._stopping.is_set():
            self.died = True
            log.error("the webhook worker exited with code %s; stopping the rq-worker", code)
            # What it left behind in its process group (RQ's scheduler, forked by it) goes with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM (RQ finishes the delivery under way), then wait; killed if it does not end in time."""
        self._stopping.set()
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=_CHILD_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._watcher.join(timeout=5)
