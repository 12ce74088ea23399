"""An engine group's one ops port: every engine's metrics labelled, ready only when every engine is.

The engines are small standard-library HTTP servers with canned /metrics and /readyz answers (one
answering 503, one not listening at all), read over real sockets as Prometheus and a kubelet would.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from contract.errors import ConfigurationError
from contract.version import dragoman_version
from worker.engine_group_ops import EngineGroupOpsServer
from worker.exposition import ExpositionError, MetricFamilies, parse_sample
from worker.supervisor import ChildStatus, OpsAddress

# Label insertion ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "labelled"),
    [
        ("foo 1", 'foo{engine="gpu0-e1"} 1'),
        ('foo{a="b"} 1.5 1700000000000', 'foo{engine="gpu0-e1",a="b"} 1.5 1700000000000'),
        ("foo{} 0", 'foo{engine="gpu0-e1"} 0'),
        ('foo{a="b",} 1', 'foo{engine="gpu0-e1",a="b"} 1'),  # a trailing comma is allowed
        ('  foo { a = "b" , c="d" }   2  ', 'foo{engine="gpu0-e1",a="b",c="d"} 2'),
        # Escaped quotes, commas, braces, backslashes and newlines inside a value are copied as written.
        (r'foo{a="x\"y,}{\\\n",b="}"} 1', r'foo{engine="gpu0-e1",a="x\"y,}{\\\n",b="}"} 1'),
        ('foo{a="v 1 2"} 3', 'foo{engine="gpu0-e1",a="v 1 2"} 3'),
        # vLLM's own engine label (its engine index) is kept under Prometheus's name for a clash.
        (
            'vllm:num_requests_running{engine="0",model_name="m"} 7.0',
            'vllm:num_requests_running{engine="gpu0-e1",exported_engine="0",model_name="m"} 7.0',
        ),
        ('h_bucket{le="+Inf"} 4', 'h_bucket{engine="gpu0-e1",le="+Inf"} 4'),
        ("x NaN", 'x{engine="gpu0-e1"} NaN'),
        # Text format 1.0.0: a name that needs quotes goes first inside the braces.
        ('{"my.metric",a="b"} 1', '{"my.metric",engine="gpu0-e1",a="b"} 1'),
        ('{"my.metric"} 1', '{"my.metric",engine="gpu0-e1"} 1'),
    ],
)
def test_the_engine_label_goes_first_and_the_rest_is_copied_as_written(line: str, labelled: str) -> None:
    assert parse_sample(line).with_label("engine", "gpu0-e1").render() == labelled


def test_a_label_value_of_ours_is_escaped() -> None:
    sample = parse_sample("foo 1").with_label("engine", 'a"b\\c\nd')
    assert sample.render() == r'foo{engine="a\"b\\c\nd"} 1'
    again = parse_sample(sample.render())
    assert again.labels == (("engine", r'"a\"b\\c\nd"'),) and again.value == "1"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('foo{a="b} 1', "unterminated quoted string"),
        ('foo{a="b\\"} 1', "unterminated quoted string"),
        ("foo{a} 1", "expected '='"),
        ("foo{a=b} 1", "expected a quoted label value"),
        ('foo{a="b" c="d"} 1', "expected '}'"),
        ('foo{a="b"', "expected '}'"),
        ("foo", "expected a value"),
        ('foo{a="b"}', "expected a value"),
        ("foo-bar 1", "expected a space after the metric name"),
        ("foo one", "expected a number and an optional timestamp"),
        ("foo 1 2 3", "expected a number and an optional timestamp"),
        ("foo 1_000", "expected a number and an optional timestamp"),
        ('{a="b"} 1', "expected a metric name"),
        ("1foo 2", "expected a metric name"),
    ],
)
def test_a_line_that_is_not_a_sample_is_refused_with_where_and_why(line: str, problem: str) -> None:
    with pytest.raises(ExpositionError, match=problem) as raised:
        parse_sample(line)
    assert repr(line.strip()) in str(raised.value)


ENGINE_A = """\
# HELP dragoman_jobs_total Final rows this worker committed
# TYPE dragoman_jobs_total counter
dragoman_jobs_total{status="succeeded"} 3.0
dragoman_jobs_total{status="failed"} 0.0
# HELP dragoman_jobs_created Final rows this worker committed
# TYPE dragoman_jobs_created gauge
dragoman_jobs_created{status="succeeded"} 1.7e+09
# HELP dragoman_stage_seconds Seconds per stage
# TYPE dragoman_stage_seconds histogram
dragoman_stage_seconds_bucket{le="0.5",stage="engine"} 1.0
dragoman_stage_seconds_bucket{le="+Inf",stage="engine"} 2.0
dragoman_stage_seconds_count{stage="engine"} 2.0
dragoman_stage_seconds_sum{stage="engine"} 1.25
# a comment that is not HELP or TYPE
vllm:num_requests_running{engine="0",model_name="m"} 4.0
"""

ENGINE_B = """\
# HELP dragoman_stage_seconds Seconds per stage (ignored: the first HELP stays)
# TYPE dragoman_stage_seconds histogram
dragoman_stage_seconds_bucket{le="0.5",stage="engine"} 0.0
dragoman_stage_seconds_bucket{le="+Inf",stage="engine"} 1.0
dragoman_stage_seconds_count{stage="engine"} 1.0
dragoman_stage_seconds_sum{stage="engine"} 0.75
# HELP dragoman_jobs_total Final rows this worker committed
# TYPE dragoman_jobs_total counter
dragoman_jobs_total{status="succeeded"} 5.0 1700000000000
this line is { not a sample
# EOF
"""


def test_pages_merge_family_by_family_with_one_help_and_type_each() -> None:
    families = MetricFamilies()
    assert families.add_exposition(ENGINE_A, ("engine", "e0")) == []
    [problem] = families.add_exposition(ENGINE_B, ("engine", "e1"))
    assert "this line is { not a sample" in problem
    assert families.render() == (
        "# HELP dragoman_jobs_total Final rows this worker committed\n"
        "# TYPE dragoman_jobs_total counter\n"
        'dragoman_jobs_total{engine="e0",status="succeeded"} 3.0\n'
        'dragoman_jobs_total{engine="e0",status="failed"} 0.0\n'
        'dragoman_jobs_total{engine="e1",status="succeeded"} 5.0 1700000000000\n'
        "# HELP dragoman_jobs_created Final rows this worker committed\n"
        "# TYPE dragoman_jobs_created gauge\n"
        'dragoman_jobs_created{engine="e0",status="succeeded"} 1.7e+09\n'
        "# HELP dragoman_stage_seconds Seconds per stage\n"
        "# TYPE dragoman_stage_seconds histogram\n"
        'dragoman_stage_seconds_bucket{engine="e0",le="0.5",stage="engine"} 1.0\n'
        'dragoman_stage_seconds_bucket{engine="e0",le="+Inf",stage="engine"} 2.0\n'
        'dragoman_stage_seconds_count{engine="e0",stage="engine"} 2.0\n'
        'dragoman_stage_seconds_sum{engine="e0",stage="engine"} 1.25\n'
        'dragoman_stage_seconds_bucket{engine="e1",le="0.5",stage="engine"} 0.0\n'
        'dragoman_stage_seconds_bucket{engine="e1",le="+Inf",stage="engine"} 1.0\n'
        'dragoman_stage_seconds_count{engine="e1",stage="engine"} 1.0\n'
        'dragoman_stage_seconds_sum{engine="e1",stage="engine"} 0.75\n'
        'vllm:num_requests_running{engine="e0",exported_engine="0",model_name="m"} 4.0\n'
    )


def test_the_merged_page_reads_back_with_prometheus_clients_parser() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    families = MetricFamilies()
    families.add_exposition(ENGINE_A, ("engine", "e0"))
    families.add_exposition(ENGINE_B, ("engine", "e1"))
    parsed = {family.name: family for family in text_string_to_metric_families(families.render())}
    histogram = parsed["dragoman_stage_seconds"]
    assert histogram.type == "histogram"
    counts = {s.labels["engine"]: s.value for s in histogram.samples if s.name.endswith("_count")}
    assert counts == {"e0": 2.0, "e1": 1.0}


# Fake engines ------------------------------------------------------------------------------------


@dataclass
class Canned:
    """What a fake engine answers: its /metrics page and its /readyz status and body."""

    metrics: str = ""
    ready_status: int = 200
    ready_body: str = '{"ready": true, "checks": {"engine": "ok", "redis": "ok", "postgres": "ok"}}'
    hold: threading.Event | None = None  # set: answer only once the test ends (a slow engine)
    asked: threading.Event = field(default_factory=threading.Event)  # set by each request
    metrics_status: int = 200


class _FakeEngineHandler(BaseHTTPRequestHandler):
    server: _FakeEngine

    def do_GET(self) -> None:
        canned = self.server.canned
        canned.asked.set()
        if canned.hold is not None:
            canned.hold.wait(10)
        if self.path == "/metrics":
            status, body = canned.metrics_status, canned.metrics
        elif self.path == "/readyz":
            status, body = canned.ready_status, canned.ready_body
        else:
            status, body = 404, "not found"
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _FakeEngine(ThreadingHTTPServer):
    daemon_threads = False  # joined when it closes: a test ends with no thread of its own left
    block_on_close = True

    def __init__(self, canned: Canned) -> None:
        self.canned = canned
        super().__init__(("127.0.0.1", 0), _FakeEngineHandler)


@dataclass
class FakeEngineGroup:
    """Stands in for the supervisor: the engines' statuses as the test sets them."""

    statuses: list[ChildStatus]
    stopping: bool = False
    gate: threading.Event | None = None  # set: children() waits for it (a request held inside the server)
    entered: threading.Event = field(default_factory=threading.Event)

    def children(self) -> list[ChildStatus]:
        if self.gate is not None:
            self.entered.set()
            self.gate.wait(5)
        return list(self.statuses)


@dataclass
class Engines:
    """Starts fake engines on threads; stops them all at the end of the test."""

    servers: list[tuple[_FakeEngine, threading.Thread]] = field(default_factory=list)

    def serving(self, name: str, canned: Canned, pid: int = 100) -> ChildStatus:
        server = _FakeEngine(canned)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        self.servers.append((server, thread))
        return ChildStatus(name, "running", pid, 0, OpsAddress("127.0.0.1", int(server.server_address[1])))

    def stop(self, status: ChildStatus) -> None:
        for server, thread in list(self.servers):
            if status.ops is not None and server.server_address[1] == status.ops.port:
                self._stop(server, thread)

    def stop_all(self) -> None:
        for server, thread in list(self.servers):
            self._stop(server, thread)

    def _stop(self, server: _FakeEngine, thread: threading.Thread) -> None:
        if server.canned.hold is not None:
            server.canned.hold.set()
        server.shutdown()
        server.server_close()
        thread.join()
        self.servers.remove((server, thread))


def silent(name: str, pid: int = 300) -> ChildStatus:
    """A running engine whose port nothing listens on (it is still loading its model)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return ChildStatus(name, "running", pid, 0, OpsAddress("127.0.0.1", port))


@pytest.fixture
def engines() -> Iterator[Engines]:
    started = Engines()
    yield started
    started.stop_all()


OpsFactory = Callable[[FakeEngineGroup], EngineGroupOpsServer]


@pytest.fixture
def engine_group_ops() -> Iterator[OpsFactory]:
    servers: list[EngineGroupOpsServer] = []

    def start(group: FakeEngineGroup) -> EngineGroupOpsServer:
        server = EngineGroupOpsServer(group, host="127.0.0.1", port=0, fetch_timeout=0.3)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def get(server: EngineGroupOpsServer, path: str) -> tuple[int, str, str]:
    """Status, content type and body of a GET on the engine group's port."""
    assert server.port is not None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


A_METRICS = """\
# HELP dragoman_jobs_in_flight Jobs holding a slot
# TYPE dragoman_jobs_in_flight gauge
dragoman_jobs_in_flight 2.0
# HELP dragoman_jobs_total Final rows
# TYPE dragoman_jobs_total counter
dragoman_jobs_total{status="succeeded"} 7.0
"""
B_METRICS = """\
# HELP dragoman_jobs_in_flight Jobs holding a slot
# TYPE dragoman_jobs_in_flight gauge
dragoman_jobs_in_flight 0.0
"""
B_NOT_READY = '{"ready": false, "checks": {"engine": "draining", "redis": "ok", "postgres": "ok"}}'


def test_the_engine_group_metrics_label_each_engine_and_say_which_are_up(
    engines: Engines, engine_group_ops: OpsFactory
) -> None:
    a = engines.serving("gpu0-e0", Canned(A_METRICS))
    b = engines.serving("gpu0-e1", Canned(B_METRICS, 503, B_NOT_READY))
    c = replace(silent("gpu1-e0"), restarts=2)
    d = ChildStatus("gpu1-e1", "restarting", None, 5, OpsAddress("127.0.0.1", 1))
    e = engines.serving("gpu2-e0", Canned("dragoman_jobs_in_flight 9.0\n", metrics_status=500))  # an error page
    ops = engine_group_ops(FakeEngineGroup([a, b, c, d, e]))
    status, content_type, body = get(ops, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert body == (
        "# HELP dragoman_engine_up Whether the engine's worker answered /readyz with 200 at this scrape (1) "
        "or not (0)\n"
        "# TYPE dragoman_engine_up gauge\n"
        'dragoman_engine_up{engine="gpu0-e0"} 1\n'
        'dragoman_engine_up{engine="gpu0-e1"} 0\n'
        'dragoman_engine_up{engine="gpu1-e0"} 0\n'
        'dragoman_engine_up{engine="gpu1-e1"} 0\n'
        'dragoman_engine_up{engine="gpu2-e0"} 1\n'
        "# HELP dragoman_engine_restarts_total Times the engine group restarted the engine's worker process\n"
        "# TYPE dragoman_engine_restarts_total counter\n"
        'dragoman_engine_restarts_total{engine="gpu0-e0"} 0\n'
        'dragoman_engine_restarts_total{engine="gpu0-e1"} 0\n'
        'dragoman_engine_restarts_total{engine="gpu1-e0"} 2\n'
        'dragoman_engine_restarts_total{engine="gpu1-e1"} 5\n'
        'dragoman_engine_restarts_total{engine="gpu2-e0"} 0\n'
        "# HELP dragoman_jobs_in_flight Jobs holding a slot\n"
        "# TYPE dragoman_jobs_in_flight gauge\n"
        'dragoman_jobs_in_flight{engine="gpu0-e0"} 2.0\n'
        'dragoman_jobs_in_flight{engine="gpu0-e1"} 0.0\n'  # not ready (draining), but it answered
        "# HELP dragoman_jobs_total Final rows\n"
        "# TYPE dragoman_jobs_total counter\n"
        'dragoman_jobs_total{engine="gpu0-e0",status="succeeded"} 7.0\n'
    )


def test_the_group_is_ready_only_when_every_engine_is(engines: Engines, engine_group_ops: OpsFactory) -> None:
    a = engines.serving("gpu0-e0", Canned(A_METRICS), pid=11)
    b = engines.serving("gpu0-e1", Canned(B_METRICS, 503, B_NOT_READY), pid=12)
    c = silent("gpu1-e0", pid=13)
    d = ChildStatus("gpu1-e1", "restarting", None, 1, OpsAddress("127.0.0.1", 1))
    group = FakeEngineGroup([a, b, c, d])
    ops = engine_group_ops(group)
    status, content_type, body = get(ops, "/readyz")
    assert (status, content_type) == (503, "application/json")
    assert json.loads(body) == {
        "ready": False,
        "stopping": False,
        "engines": {
            "gpu0-e0": {"ready": True, "state": json.loads(Canned().ready_body), "pid": 11, "restarts": 0},
            "gpu0-e1": {"ready": False, "state": json.loads(B_NOT_READY), "pid": 12, "restarts": 0},
            "gpu1-e0": {"ready": False, "state": "starting", "pid": 13, "restarts": 0},
            "gpu1-e1": {"ready": False, "state": "restarting", "pid": None, "restarts": 1},
        },
    }
    group.statuses = [a]
    status, _, body = get(ops, "/readyz")
    assert status == 200 and json.loads(body)["ready"] is True
    group.statuses = [a, replace(engines.serving("gpu0-e1", Canned(ready_body="ok, plain text")), pid=12)]
    status, _, body = get(ops, "/readyz")
    assert status == 200 and json.loads(body)["engines"]["gpu0-e1"]["state"] == "ok, plain text"


def test_an_engine_that_stops_answering_is_not_answering_and_its_replacement_is_starting(
    engines: Engines, engine_group_ops: OpsFactory
) -> None:
    a = engines.serving("e0", Canned(A_METRICS), pid=21)
    group = FakeEngineGroup([a])
    ops = engine_group_ops(group)
    assert get(ops, "/readyz")[0] == 200
    engines.stop(a)  # the process hangs or lost its port: the same pid, no answer
    status, _, body = get(ops, "/readyz")
    assert status == 503
    assert a.ops is not None
    state = json.loads(body)["engines"]["e0"]["state"]
    assert state == f"not answering: Connection refused (127.0.0.1:{a.ops.port})"
    metrics = get(ops, "/metrics")
    assert metrics[0] == 200 and 'dragoman_engine_up{engine="e0"} 0\n' in metrics[2]
    assert "dragoman_jobs" not in metrics[2]  # nothing else from it
    group.statuses = [replace(a, pid=22, restarts=1)]  # restarted: a new process loading its engine
    status, _, body = get(ops, "/readyz")
    assert status == 503 and json.loads(body)["engines"]["e0"]["state"] == "starting"


def test_a_slow_engine_costs_the_timeout_not_the_scrape(engines: Engines, engine_group_ops: OpsFactory) -> None:
    fast = engines.serving("e0", Canned(A_METRICS))
    slow = engines.serving("e1", Canned(B_METRICS, hold=threading.Event()))
    ops = engine_group_ops(FakeEngineGroup([fast, slow]))
    status, _, body = get(ops, "/metrics")  # e1 never answers: without fetch_timeout this would wait forever
    assert status == 200
    assert 'dragoman_engine_up{engine="e0"} 1\n' in body and 'dragoman_engine_up{engine="e1"} 0\n' in body
    assert 'dragoman_jobs_in_flight{engine="e0"} 2.0\n' in body and '{engine="e1"} 0.0' not in body


def test_a_stopping_group_is_not_ready(engines: Engines, engine_group_ops: OpsFactory) -> None:
    ops = engine_group_ops(FakeEngineGroup([engines.serving("e0", Canned())], stopping=True))
    status, _, body = get(ops, "/readyz")
    assert status == 503 and json.loads(body)["stopping"] is True
    assert json.loads(body)["engines"]["e0"]["ready"] is True


def test_healthz_answers_while_the_group_runs_and_other_paths_are_not_found(engine_group_ops: OpsFactory) -> None:
    ops = engine_group_ops(FakeEngineGroup([silent("e0"), silent("e1")]))
    status, content_type, body = get(ops, "/healthz?probe=kubelet")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {"alive": True, "version": dragoman_version(), "engines": 2}
    assert get(ops, "/nothing")[0] == 404


def test_close_waits_for_the_request_in_progress_and_leaves_no_thread_running(engines: Engines) -> None:
    group = FakeEngineGroup([engines.serving("e0", Canned(A_METRICS)), silent("e1")])
    before = set(threading.enumerate())
    ops = EngineGroupOpsServer(group, host="127.0.0.1", port=0, fetch_timeout=0.3)
    ops.start()
    assert get(ops, "/metrics")[0] == 200  # the fetchers have started too
    names = {thread.name for thread in threading.enumerate()}
    assert "dragoman-engine-group-ops" in names and any(n.startswith("dragoman-engine-group-ops-fetch") for n in names)
    group.gate = threading.Event()
    answers: list[tuple[int, str, str]] = []
    client = threading.Thread(target=lambda: answers.append(get(ops, "/readyz")))
    client.start()
    assert group.entered.wait(2)  # a request is inside the server
    assert "dragoman-engine-group-ops-request" in {thread.name for thread in threading.enumerate()}
    port = ops.port
    closer = threading.Thread(target=ops.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # close waits for the request being answered
    group.gate.set()
    closer.join(2)
    client.join(2)
    assert answers and answers[0][0] == 503  # answered (e1 is starting) before the server went away
    assert not [t.name for t in threading.enumerate() if t.name.startswith("dragoman-engine-group-ops")]
    engines.stop_all()  # the fake engines' own threads, to leave only what was there before
    assert set(threading.enumerate()) - before == set()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()  # the port is released
    ops.close()  # twice is harmless


def test_a_busy_port_is_a_configuration_error_that_says_what_to_do() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = int(busy.getsockname()[1])
        ops = EngineGroupOpsServer(FakeEngineGroup([]), host="127.0.0.1", port=port)
        with pytest.raises(ConfigurationError, match="DRAGOMAN_METRICS_PORT"):
            ops.start()
        ops.close()


def test_the_interactive_engine_counts_for_the_groups_readiness_like_the_others(
    engines: Engines, engine_group_ops: OpsFactory
) -> None:
    """``--interactive-engine``'s engine is a child of the engine group like any: not ready, the engine group is not."""
    regular = engines.serving("gpu0-e0", Canned(A_METRICS), pid=31)
    interactive = ChildStatus("gpu0-interactive", "restarting", None, 1, OpsAddress("127.0.0.1", 1))
    group = FakeEngineGroup([regular, interactive])
    ops = engine_group_ops(group)
    status, _, body = get(ops, "/readyz")
    assert status == 503 and json.loads(body)["engines"]["gpu0-interactive"]["state"] == "restarting"
    group.statuses = [regular, engines.serving("gpu0-interactive", Canned(B_METRICS), pid=32)]
    assert get(ops, "/readyz")[0] == 200
    assert 'dragoman_jobs_in_flight{engine="gpu0-interactive"} 0.0\n' in get(ops, "/metrics")[2]
