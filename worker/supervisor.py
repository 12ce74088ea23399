"""Several engines under one command: one worker process per engine, each restarted on its own.

``dragoman worker --engines N --gpus 0,1`` runs N worker processes per GPU (measured faster than
one engine for models up to a few billion parameters: see :mod:`worker.engine_count`). Each
child is a whole ``dragoman worker`` with its own consumer, writer and engine, so a crash takes
down one engine's share only: the supervisor restarts that child (with a growing, jittered
delay while it keeps crashing) and the others go on; the dead child's in-flight jobs are taken
over by the live workers as soon as its heartbeat expires (:func:`broker.pending.claim_orphans`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Literal

from contract.backoff import Backoff

log = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
"""A child that exits with this was misconfigured: restarting it cannot help, so the engine group stops."""

STABLE_AFTER_S = 60.0
"""A child that ran this long before it died starts again at once; quicker deaths back off."""

START_TIMEOUT_S = 900.0
"""How long an engine of an engine group may take to start before the next one on its GPU starts anyway."""

STOP_MARGIN_S = 30.0
"""How long past ``DRAGOMAN_SHUTDOWN_GRACE_SECONDS`` an engine group waits for a draining child before killing it
(the writer's last flush, the engine's shutdown): a pod's or container's stop grace must cover both."""


@dataclass(frozen=True, slots=True)
class OpsAddress:
    """Where a child serves its ``/metrics``, ``/healthz`` and ``/readyz``, for the engine group's ops server to read.

    With ``port_file``, ``port`` is 0: the child binds any free port itself and writes its number to
    that file (``DRAGOMAN_OPS_PORT_FILE``), so no other process can take the port between a choice
    made here and the child's bind, minutes later for an engine that starts after others.
    """

    host: str
    port: int
    port_file: Path | None = None


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One engine's worker process: a name for the logs, its command line, what it adds to the environment.

    ``ops`` is where the child serves its ops endpoints (None when metrics are off). ``start_after``
    names the child that must have started its engine first: engines sharing a GPU start one after
    the other, because vLLM sizes an engine's KV cache from the GPU memory it sees in use while it
    starts, and engines starting together count each other's allocations (measured on an H100:
    four 135M engines started at once got 13.2, 0.7, 0.5 and 1.1 GiB of KV cache for 16.8 GiB each).
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    ops: OpsAddress | None = None
    start_after: str | None = None


ChildPhase = Literal["running", "restarting", "stopped"]
"""A child's process is up; it died and waits out its restart delay; or it is not running (before the
start, after the stop)."""


@dataclass(frozen=True, slots=True)
class ChildStatus:
    """A snapshot of one child, for the engine group's ``/metrics`` and ``/readyz`` (read from another thread)."""

    name: str
    phase: ChildPhase
    pid: int | None
    restarts: int
    ops: OpsAddress | None


class _Child:
    """A running (or waiting to restart) child and its restart state."""

    def __init__(self, spec: ChildSpec, backoff: Backoff) -> None:
        self.spec = spec
        self.backoff = backoff
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.restart_at: float | None = None
        self.restarts = 0
        self.waiting_since: float | None = None  # first start held back for the engine before it
        self.ops: OpsAddress | None = None if _port_from_file(spec.ops) else spec.ops  # known once bound

    def resolve_ops(self) -> OpsAddress | None:
        """Where the running process serves its ops endpoints; None until it has written its port."""
        if self.ops is None and self.process is not None and self.spec.ops is not None:
            port = _read_port(self.spec.ops.port_file)
            if port is not None:
                self.ops = OpsAddress(self.spec.ops.host, port)
        return self.ops


class EngineSupervisor:
    """Runs one process per :class:`ChildSpec` until asked to stop; returns the engine group's exit code.

    SIGTERM or SIGINT (or :meth:`request_stop`) is passed to every child, which drains its jobs;
    children still running ``stop_timeout`` seconds later are killed. The exit code is 0 when
    every child stopped cleanly, 2 when a child said its configuration is wrong, else 1.
    """

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        stop_timeout: float,
        backoff: Callable[[], Backoff] = lambda: Backoff(1.0, 60.0),
        poll_interval: float = 0.2,
        engine_started: Callable[[ChildStatus], bool] = lambda status: True,
        start_timeout: float = START_TIMEOUT_S,
    ) -> None:
        if not children:
            raise ValueError("an engine group needs at least one child")
        names = {spec.name for spec in children}
        unknown = [spec.start_after for spec in children if spec.start_after and spec.start_after not in names]
        if unknown:
            raise ValueError(f"start_after names no child of the engine group: {unknown}")
        self._children = [_Child(spec, backoff()) for spec in children]
        self._engine_started = engine_started
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._poll = poll_interval
        self._stopping = False
        self._fatal = False
        self._lock = threading.Lock()  # children() reads from the ops server's thread

    @property
    def restarts(self) -> dict[str, int]:
        """How often each child was restarted, by name."""
        return {child.spec.name: child.restarts for child in self._children}

    def pids(self) -> dict[str, int | None]:
        """Each child's current process id (None while it waits to restart)."""
        return {c.spec.name: (c.process.pid if c.process is not None else None) for c in self._children}

    @property
    def stopping(self) -> bool:
        """The engine group was asked to stop (or a child's bad configuration stopped it): its engines drain."""
        return self._stopping

    def children(self) -> list[ChildStatus]:
        """Each child's phase, process id, restart count and ops address now, in the order of the specs
        (thread-safe)."""
        with self._lock:
            return [_status(child) for child in self._children]

    def request_stop(self, *_: object) -> None:
        """Stop the engine group: every child drains and exits (safe to call from a signal handler)."""
        self._stopping = True

    def run(self, *, install_signal_handlers: bool = True) -> int:
        """Start every child, keep them running until asked to stop, then stop them; the exit code."""
        if install_signal_handlers:
            previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            waiting = list(self._children)  # not started yet: each waits for the child it starts after
            while not self._stopping:
                waiting = [child for child in waiting if not self._start_if_due(child)]
                self._check_children()
                time.sleep(self._poll)
            return self._stop_all()
        finally:
            if install_signal_handlers:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request_stop()

    def _start_if_due(self, child: _Child) -> bool:
        """Start ``child`` for the first time once the child it starts after has its engine up (or
        gave up on it); whether it was started."""
        after = child.spec.start_after
        if after is not None:
            first = next(c for c in self._children if c.spec.name == after)
            if first.process is None and first.restart_at is None and first.restarts == 0:
                return False  # not started itself yet
            now = time.monotonic()
            if child.waiting_since is None:
                child.waiting_since = now
            waited = now - child.waiting_since
            if waited < self._start_timeout:
                if first.process is None or not self._engine_started(self._status_of(first)):
                    return False  # still starting, or crashed while starting and waiting to restart
            else:
                log.warning("engine %s not up after %.0fs; starting %s anyway", after, waited, child.spec.name)
        self._start(child)
        return True

    def _status_of(self, child: _Child) -> ChildStatus:
        with self._lock:
            return _status(child)

    def _start(self, child: _Child) -> None:
        env = {**os.environ, **child.spec.env}
        if _port_from_file(child.spec.ops):
            assert child.spec.ops is not None and child.spec.ops.port_file is not None
            child.spec.ops.port_file.unlink(missing_ok=True)  # the last process's port
            with self._lock:
                child.ops = None
        # Its own process group, so that the engine processes vLLM spawns can be killed with it.
        process = subprocess.Popen(list(child.spec.argv), env=env, start_new_session=True)
        with self._lock:
            child.process = process
            child.started_at = time.monotonic()
            child.restart_at = None
        log.info("engine %s started (pid %d)", child.spec.name, process.pid)

    def _check_children(self) -> None:
        now = time.monotonic()
        for child in self._children:
            if child.process is None:
                if child.restart_at is not None and now >= child.restart_at:
                    with self._lock:
                        child.restarts += 1
                    self._start(child)
                continue
            code = child.process.poll()
            if code is None:
                continue
            _kill_leftovers(child.process.pid)
            if code == EXIT_BAD_INPUT:
                with self._lock:
                    child.process = None
                log.error(
                    "engine %s exited with %d (bad configuration): stopping the engine group", child.spec.name, code
                )
                self._fatal = True
                self._stopping = True
                return
            if now - child.started_at >= STABLE_AFTER_S:
                child.backoff.reset()
            delay = child.backoff.next_delay()
            with self._lock:
                child.process = None
                child.restart_at = now + delay
            log.warning(
                "engine %s exited with %s after %.0fs; restarting it in %.1fs (the other engines go on)",
                child.spec.name,
                _describe(code),
                now - child.started_at,
                delay,
            )

    def _stop_all(self) -> int:
        running = [c for c in self._children if c.process is not None]
        for child in running:
            assert child.process is not None
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self._stop_timeout
        clean = True
        for child in running:
            assert child.process is not None
            try:
                code = child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("engine %s did not stop within %.0fs; killing it", child.spec.name, self._stop_timeout)
                child.process.kill()
                code = child.process.wait()
            _kill_leftovers(child.process.pid)
            clean = clean and code == 0
            log.info("engine %s stopped (%s)", child.spec.name, _describe(code))
        if self._fatal:
            return EXIT_BAD_INPUT
        return 0 if clean else 1


def _status(child: _Child) -> ChildStatus:
    """A child's snapshot (the caller holds the supervisor's lock)."""
    if child.process is not None:
        phase: ChildPhase = "running"
    elif child.restart_at is not None:
        phase = "restarting"
    else:
        phase = "stopped"
    pid = child.process.pid if child.process is not None else None
    return ChildStatus(child.spec.name, phase, pid, child.restarts, child.resolve_ops())


def _port_from_file(ops: OpsAddress | None) -> bool:
    return ops is not None and ops.port_file is not None


def _read_port(path: Path | None) -> int | None:
    """The port a child wrote (None: not written yet, or not a port)."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and 0 < int(text) < 65_536 else None


def _kill_leftovers(process_group: int) -> None:
    """Kill what is left of a dead child's process group.

    A worker killed with SIGKILL leaves vLLM's engine-core processes behind, holding the
    engine's memory (RAM, or the GPU's) while its replacement starts: on a CPU they ran the
    machine out of memory.
    """
    try:
        os.killpg(process_group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left


def _describe(code: int) -> str:
    """``code 1`` or ``signal SIGKILL`` for a ``Popen.returncode``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"
