"""An engine group: a crashed engine is restarted on its own, a misconfigured one stops them all, stop drains."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from contract.backoff import Backoff
from tests.waiting import wait_for
from worker.supervisor import ChildSpec, ChildStatus, EngineSupervisor, OpsAddress

# A worker-like child: exits 0 on SIGTERM (after draining), else runs until killed.
SERVES = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(600)"


def _child(name: str, code: str) -> ChildSpec:
    return ChildSpec(name=name, argv=[sys.executable, "-c", code], env={"DRAGOMAN_TEST_CHILD": name})


def _supervise(children: list[ChildSpec], **kwargs: float) -> tuple[EngineSupervisor, threading.Thread, list[int]]:
    supervisor = EngineSupervisor(
        children, stop_timeout=kwargs.get("stop_timeout", 10.0), backoff=lambda: Backoff(0.05, 0.1), poll_interval=0.02
    )
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(supervisor.run(install_signal_handlers=False)))
    thread.start()
    return supervisor, thread, result


def _until(condition: Callable[[], bool], what: str = "the supervisor's state") -> None:
    wait_for(condition, what, every=0.02)


def test_a_crashing_engine_is_restarted_and_the_others_keep_running() -> None:
    crashes = "import sys, time; time.sleep(0.2); sys.exit(1)"
    supervisor, thread, result = _supervise([_child("steady", SERVES), _child("crashy", crashes)])
    _until(lambda: supervisor.pids()["steady"] is not None)
    steady_pid = supervisor.pids()["steady"]
    _until(lambda: supervisor.restarts["crashy"] >= 2)
    assert supervisor.pids()["steady"] == steady_pid  # untouched by its neighbour's crashes
    assert supervisor.restarts["steady"] == 0
    supervisor.request_stop()
    thread.join(30)
    assert result and result[0] in (0, 1)  # crashy may be mid-crash when the stop lands


def test_children_say_whether_they_run_or_wait_to_restart_for_the_groups_ops_server() -> None:
    ops = OpsAddress("127.0.0.1", 9465)
    steady = ChildSpec("steady", [sys.executable, "-c", SERVES], ops=ops)
    supervisor = EngineSupervisor(
        [steady, _child("crashy", "import sys; sys.exit(1)")],
        stop_timeout=10.0,
        backoff=lambda: Backoff(30.0, 30.0),  # crashy waits out its restart delay for the rest of the test
        poll_interval=0.02,
    )
    assert [(c.name, c.phase, c.pid) for c in supervisor.children()] == [
        ("steady", "stopped", None),
        ("crashy", "stopped", None),
    ]
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(supervisor.run(install_signal_handlers=False)))
    thread.start()
    _until(lambda: [c.phase for c in supervisor.children()] == ["running", "restarting"])
    running, waiting = supervisor.children()
    assert running == ChildStatus("steady", "running", supervisor.pids()["steady"], 0, ops)
    assert waiting == ChildStatus("crashy", "restarting", None, 0, None)
    assert not supervisor.stopping
    supervisor.request_stop()
    assert supervisor.stopping
    thread.join(30)
    assert result and result[0] in (0, 1)  # steady may be stopped before its SIGTERM handler is set


def test_a_killed_engine_comes_back_with_a_new_process() -> None:
    supervisor, thread, result = _supervise([_child("a", SERVES), _child("b", SERVES)])
    _until(lambda: all(supervisor.pids().values()))
    first = supervisor.pids()["b"]
    assert first is not None
    os.kill(first, signal.SIGKILL)
    _until(lambda: supervisor.restarts["b"] == 1 and supervisor.pids()["b"] not in (None, first))
    time.sleep(0.5)  # the new process installs its SIGTERM handler
    supervisor.request_stop()
    thread.join(30)
    assert result == [0]  # both drained and exited cleanly on SIGTERM


def test_a_misconfigured_engine_stops_the_group_with_exit_2() -> None:
    supervisor, thread, result = _supervise([_child("ok", SERVES), _child("bad", "import sys; sys.exit(2)")])
    thread.join(30)
    assert result == [2]
    assert supervisor.restarts == {"ok": 0, "bad": 0}


def test_an_engine_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    supervisor, thread, result = _supervise([_child("stubborn", stubborn)], stop_timeout=0.5)
    _until(lambda: supervisor.pids()["stubborn"] is not None)
    time.sleep(0.3)  # let it install its handler
    supervisor.request_stop()
    thread.join(30)
    assert result == [1]


def test_children_get_their_own_environment() -> None:
    checks = "import os, sys; os.environ['DRAGOMAN_TEST_CHILD'] == 'mine' or sys.exit(2); " + SERVES
    supervisor, thread, result = _supervise([_child("mine", checks)])
    time.sleep(1.0)
    supervisor.request_stop()
    thread.join(30)
    assert result == [0] and supervisor.restarts == {"mine": 0}


def test_a_killed_engine_takes_its_own_child_processes_with_it(tmp_path: Path) -> None:
    # Like vLLM's engine core: a grandchild that outlives its parent's SIGKILL unless someone kills it.
    pid_file = tmp_path / "grandchild.pid"
    spawns = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(600)"
    )
    supervisor, thread, result = _supervise([_child("engine", spawns)])
    _until(lambda: pid_file.exists() and pid_file.read_text() != "")
    grandchild = int(pid_file.read_text())
    first = supervisor.pids()["engine"]
    assert first is not None
    os.kill(first, signal.SIGKILL)
    _until(lambda: supervisor.restarts["engine"] == 1)
    _until(lambda: not _alive(grandchild))
    _until(lambda: pid_file.read_text() not in ("", str(grandchild)))  # the new one is up, its handler set
    supervisor.request_stop()
    thread.join(30)
    assert result == [0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (killed, not yet reaped by init) counts as gone
        return stat.read().split(") ")[-1][0] != "Z"


def test_engines_sharing_a_gpu_start_one_after_the_other() -> None:
    """vLLM sizes a starting engine's KV cache from the GPU memory in use: engines starting together
    count each other's allocations, so the next one starts only once the one before it is up."""
    up: set[str] = set()
    first = _child("gpu0-e0", SERVES)
    second = ChildSpec("gpu0-e1", first.argv, start_after="gpu0-e0")
    other_gpu = ChildSpec("gpu1-e0", first.argv)
    supervisor = EngineSupervisor(
        [first, second, other_gpu],
        stop_timeout=10.0,
        poll_interval=0.02,
        engine_started=lambda status: status.name in up,
    )
    thread = threading.Thread(target=lambda: supervisor.run(install_signal_handlers=False))
    thread.start()
    try:
        _until(lambda: supervisor.pids()["gpu0-e0"] is not None and supervisor.pids()["gpu1-e0"] is not None)
        time.sleep(0.3)
        assert supervisor.pids()["gpu0-e1"] is None  # its GPU's first engine is still starting
        up.add("gpu0-e0")
        _until(lambda: supervisor.pids()["gpu0-e1"] is not None)
    finally:
        supervisor.request_stop()
        thread.join(30)


def test_an_engine_that_never_comes_up_holds_the_next_one_only_until_the_start_timeout() -> None:
    first = _child("e0", SERVES)
    supervisor = EngineSupervisor(
        [first, ChildSpec("e1", first.argv, start_after="e0")],
        stop_timeout=10.0,
        poll_interval=0.02,
        engine_started=lambda status: False,
        start_timeout=0.5,
    )
    thread = threading.Thread(target=lambda: supervisor.run(install_signal_handlers=False))
    thread.start()
    try:
        _until(lambda: supervisor.pids()["e1"] is not None, "e1 started")
    finally:
        supervisor.request_stop()
        thread.join(30)


def test_a_start_after_naming_no_child_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="start_after names no child"):
        EngineSupervisor([ChildSpec("e1", ["true"], start_after="e9")], stop_timeout=1.0)


def test_an_engine_crashing_while_it_starts_holds_the_next_one_until_it_is_up() -> None:
    crashes = ChildSpec("e0", [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(1)"])
    supervisor = EngineSupervisor(
        [crashes, ChildSpec("e1", [sys.executable, "-c", SERVES], start_after="e0")],
        stop_timeout=5.0,
        backoff=lambda: Backoff(2.0, 2.0),
        poll_interval=0.05,
        engine_started=lambda status: False,  # e0's engine never comes up
    )
    thread = threading.Thread(target=lambda: supervisor.run(install_signal_handlers=False))
    thread.start()
    try:
        time.sleep(1.2)  # e0 crashed and waits to restart
        assert {c.name: c.phase for c in supervisor.children()} == {"e0": "restarting", "e1": "stopped"}
    finally:
        supervisor.request_stop()
        thread.join(30)


# A child that binds any free port, writes it where DRAGOMAN_OPS_PORT_FILE says, serves, then exits 1.
BINDS = """
import os, socket, sys, time
held = socket.socket(); held.bind(("127.0.0.1", 0)); held.listen()
path = os.environ["DRAGOMAN_OPS_PORT_FILE"]
with open(path + ".partial", "w") as f: f.write(f"{held.getsockname()[1]}\\n")
os.replace(path + ".partial", path)
time.sleep(float(os.environ.get("DRAGOMAN_TEST_LIFETIME", "600"))); sys.exit(1)
"""


def test_an_engine_that_binds_any_free_port_is_found_where_it_wrote_the_port_and_again_after_a_restart(
    tmp_path: Path,
) -> None:
    port_file = tmp_path / "e0.port"
    spec = ChildSpec(
        "e0",
        [sys.executable, "-c", BINDS],
        env={"DRAGOMAN_OPS_PORT_FILE": str(port_file), "DRAGOMAN_TEST_LIFETIME": "1.0"},
        ops=OpsAddress("127.0.0.1", 0, port_file=port_file),
    )
    port_file.write_text("1\n")  # a previous group's leftover must not be read as this engine's port
    supervisor, thread, result = _supervise([spec])
    seen: list[int] = []
    try:
        _until(lambda: (ops := supervisor.children()[0].ops) is not None and ops.port > 1)
        first = supervisor.children()[0].ops
        assert first is not None and first.host == "127.0.0.1" and first.port_file is None
        seen.append(first.port)
        _until(lambda: supervisor.restarts["e0"] >= 1)  # it exits after a second and starts again
        _until(lambda: (ops := supervisor.children()[0].ops) is not None and ops.port not in seen)
    finally:
        supervisor.request_stop()
        thread.join(30)
    assert result


def test_a_group_waits_for_an_engine_that_has_not_written_its_port_yet(tmp_path: Path) -> None:
    port_file = tmp_path / "e0.port"
    first = ChildSpec("e0", [sys.executable, "-c", SERVES], ops=OpsAddress("127.0.0.1", 0, port_file=port_file))
    second = ChildSpec("e1", [sys.executable, "-c", SERVES], start_after="e0")
    asked: list[ChildStatus] = []
    supervisor = EngineSupervisor(
        [first, second],
        stop_timeout=10.0,
        poll_interval=0.02,
        engine_started=lambda status: asked.append(status) is None and status.ops is not None,
    )
    thread = threading.Thread(target=lambda: supervisor.run(install_signal_handlers=False))
    thread.start()
    try:
        _until(lambda: len(asked) >= 5)
        assert supervisor.pids()["e1"] is None and all(status.ops is None for status in asked)
        port_file.write_text("45123\n")
        _until(lambda: supervisor.pids()["e1"] is not None)
        assert asked[-1].ops == OpsAddress("127.0.0.1", 45123)
    finally:
        supervisor.request_stop()
        thread.join(30)
