"""Runs and documents end to end: identity worker, real Redis and PostgreSQL, the RQ tasks in-process."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis
from rq import Queue

from contract.errors import RunNotFinishedError
from contract.inline_tags import Tag
from contract.inline_tags import tokens as tag_tokens
from contract.settings import Settings
from orchestrator.context import TaskContext
from orchestrator.dispatcher import CompletionDispatcher
from orchestrator.sweeper import GroupSweeper
from orchestrator.task_worker import TaskWorker
from orchestrator.tasks import finish_group
from producer.client import Client
from producer.run_files import InvalidRunFileError
from tests.orchestrator.test_document_formats import make_docx
from tests.orchestrator.test_segmenting import TRICKY_HTML, TRICKY_MARKDOWN
from tests.waiting import FOREVER, until
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_SECRET", "test-secret")
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_RETRY_SECONDS", "[0, 0, 0]")


class BurstWorker(TaskWorker):
    """`dragoman rq-worker`'s worker class without its command channel (``rq.command``), which a burst run in a test
    never takes: each run would start a pub/sub thread and stop it again, joining it for up to a second on a busy
    machine, while the worker under test, on the same event loop, waits."""

    def subscribe(self) -> None:
        """Take no commands: :meth:`unsubscribe` then has no thread to stop."""


def run_orchestrator() -> int:
    """What `dragoman rq-worker --burst` does: dispatch completions, sweep, then run every queued task."""
    ctx = TaskContext.from_environment()
    dispatcher = CompletionDispatcher(ctx)
    dispatcher.ensure_group()
    queued = dispatcher.dispatch_once()
    dispatcher.close()
    GroupSweeper(ctx).sweep_once()
    connection = ctx.rq_connection()
    queues = [Queue(name, connection=connection) for name in (ctx.keys.orchestration_queue, ctx.keys.webhook_queue)]
    BurstWorker(queues, connection=connection).work(burst=True)
    connection.close()
    return queued


ORCHESTRATE_EVERY_S = 0.1
"""How often :func:`orchestrate_until` runs the orchestrator: each run (about 50 ms) holds up the worker under test on
the same event loop, so every 0.05 s slows a 10,000-line run down by a second."""


async def orchestrate_until(done: Callable[[], object], what: str) -> None:
    """Run the orchestrator until ``done()`` is true, however long that takes (on this thread: RQ's worker needs
    the main thread; the worker under test waits meanwhile, which only slows it down)."""

    def orchestrated() -> object:
        run_orchestrator()
        return done()

    await until(orchestrated, what, every=ORCHESTRATE_EVERY_S)


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_ten_thousand_line_run_completes_in_order(
    start_worker: WorkerFactory, client: Client, tmp_path: Path, settings: Settings
) -> None:
    n = 10_000
    path = write_jsonl(tmp_path / "run.jsonl", [{"custom_id": f"row-{i}", "text": f"line {i}"} for i in range(n)])
    chunks: list[int] = []
    run_id = client.submit_run(path, source_lang="en", target_lang="fr", on_chunk=lambda done, _: chunks.append(done))
    assert chunks[-1] == n and len(chunks) == n // settings.submit_chunk_size + 1
    with pytest.raises(RunNotFinishedError, match="pending"):
        list(client.iter_run_results(run_id))
    async with start_worker(DeterministicEngine(), max_in_flight=256):
        await orchestrate_until(lambda: client.get_run(run_id).status == "completed", "the run completed")
    status = client.get_run(run_id)
    assert (status.counts.total, status.counts.succeeded, status.counts.pending) == (n, n, 0)
    assert status.counts.succeeded + status.counts.failed + status.counts.cancelled == n
    assert status.completed_at is not None and status.seconds_left == 0
    results = list(client.iter_run_results(run_id))
    assert [r["custom_id"] for r in results] == [f"row-{i}" for i in range(n)]
    assert all(r["translation"] == f"line {i}" for i, r in enumerate(results))


async def test_failures_are_reported_per_line(start_worker: WorkerFactory, client: Client, tmp_path: Path) -> None:
    lines = [
        {"custom_id": "a", "text": "fine", "metadata": {"row": 1}},
        {"custom_id": "b", "text": "boom here", "target_lang": "de"},
        {"custom_id": "c", "text": "also fine", "source_lang": "fr", "target_lang": "es"},
    ]
    run_id = client.submit_run(write_jsonl(tmp_path / "r.jsonl", lines), source_lang="en", target_lang="fr")
    async with start_worker(DeterministicEngine(fail_if=lambda text: "boom" in text)):
        await orchestrate_until(lambda: client.get_run(run_id).status == "completed", "the run completed")
    results = list(client.iter_run_results(run_id))
    assert results[0] == {
        "custom_id": "a",
        "status": "succeeded",
        "translation": "fine",
        "metadata": {"row": 1},
        "quality_flags": {},
    }
    assert results[1]["custom_id"] == "b" and results[1]["status"] == "failed" and "EngineError" in results[1]["error"]
    assert results[2]["translation"] == "also fine"
    counts = client.get_run(run_id).counts
    assert (counts.succeeded, counts.failed) == (2, 1)


def test_a_bad_run_file_submits_nothing(client: Client, raw_redis: redis.Redis, tmp_path: Path) -> None:
    lines = [
        '{"custom_id": "a", "text": "ok"}',
        "not json",
        '{"custom_id": "a", "text": "dup"}',
        '{"custom_id": "c", "text": "   "}',
        '{"text": "no id"}',
        '{"custom_id": "d", "text": "x", "extra": 1}',
        '{"custom_id": "e", "text": "x", "target_lang": "xx-notalang-123"}',
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidRunFileError) as error:
        client.submit_run(path, source_lang="en", target_lang="fr")
    message = str(error.value)
    for expected in (
        "line 2: not JSON",
        "line 3: custom_id 'a' already used on line 1",
        "line 4 (c)",
        "line 5: custom_id",
        "line 6: unknown field(s) extra",
        "line 7 (e)",
    ):
        assert expected in message
    assert "nothing was submitted" in message
    assert raw_redis.xlen(client.keys.jobs_stream) == 0
    no_languages = write_jsonl(tmp_path / "nolang.jsonl", [{"custom_id": "a", "text": "hi"}])
    with pytest.raises(InvalidRunFileError, match="--from/--to"):
        client.submit_run(no_languages)


async def test_cancel_run(client: Client, tmp_path: Path, start_worker: WorkerFactory) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"custom_id": str(i), "text": f"t {i}"} for i in range(50)])
    run_id = client.submit_run(path, source_lang="en", target_lang="fr")
    client.cancel_run(run_id)  # nothing has started: every job is cancelled
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(lambda: client.get_run(run_id).status == "cancelled", "the run cancelled")
    assert client.get_run(run_id).counts.cancelled == 50


@pytest.mark.parametrize(
    ("source", "fmt"), [(TRICKY_MARKDOWN, "md"), (TRICKY_HTML, "html"), ("One.\n\nTwo lines\nhere.\n", "txt")]
)
async def test_document_round_trips_byte_for_byte(
    start_worker: WorkerFactory, client: Client, source: str, fmt: str
) -> None:
    document_id = client.submit_document(source, fmt, "en", "fr", max_segment_chars=60)
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(
            lambda: client.get_document(document_id).status == "completed", "the document completed"
        )
    result = client.document_result(document_id)
    assert result.text == source.replace('<html lang="en">', '<html lang="fr">')  # the lang names the target
    assert result.failed_segments == []


async def test_out_of_order_segments_assemble_in_order_exactly_once(
    start_worker: WorkerFactory, client: Client, pg: Any, settings: Settings, raw_redis: redis.Redis
) -> None:
    source = "\n".join(f"Paragraph {i} " + "word " * (30 - i) for i in range(30)) + "\n"
    # Longer segments take longer: the first ones finish last.
    engine = DeterministicEngine(delay_for=lambda text: len(text) / 1_000)
    document_id = client.submit_document(source, "txt", "en", "fr")
    run_orchestrator()  # split
    async with start_worker(engine, max_in_flight=64):
        await orchestrate_until(
            lambda: client.get_document(document_id).status == "completed", "the document completed"
        )
    finished = [
        row[0]
        for row in pg.execute("SELECT sequence FROM jobs WHERE document_id = %s ORDER BY finished_at", (document_id,))
    ]
    assert finished != sorted(finished)  # they really finished out of order
    assert client.document_result(document_id).text == source
    # A duplicate completion entry and a direct second finish change nothing.
    raw_redis.xadd(client.keys.completions_stream, {"kind": "document", "id": document_id})
    run_orchestrator()
    assert finish_group("document", document_id) == "completed"
    assert pg.execute("SELECT assemblies FROM documents WHERE id = %s", (document_id,)).fetchone()[0] == 1


async def test_failed_segments_are_reported_and_the_source_kept(start_worker: WorkerFactory, client: Client) -> None:
    source = "Good line.\nBad boom line.\nAnother good line.\n"
    document_id = client.submit_document(source, "txt", "en", "fr")
    async with start_worker(DeterministicEngine(fail_if=lambda text: "boom" in text)):
        await orchestrate_until(lambda: client.get_document(document_id).status == "failed", "the document failed")
    result = client.document_result(document_id)
    assert result.text == source  # the failed segment keeps its source text
    [failed] = result.failed_segments
    assert failed["segment"] == 1 and failed["source"] == "Bad boom line." and "EngineError" in failed["error"]


class _Receiver(BaseHTTPRequestHandler):
    answers: ClassVar[list[int]] = []
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.send_response(self.answers.pop(0) if self.answers else 200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, type[_Receiver]]]:
    """A receiver on loopback: deliveries may go there only because its network is allowed."""
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS", '["127.0.0.0/8"]')
    handler = type("Receiver", (_Receiver,), {"answers": [500, 503], "received": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()


async def test_webhook_is_signed_and_retried_until_delivered(
    start_worker: WorkerFactory, client: Client, tmp_path: Path, pg: Any, receiver: tuple[str, type[_Receiver]]
) -> None:
    url, handler = receiver
    client.settings.webhook_secret = "test-secret"
    path = write_jsonl(tmp_path / "w.jsonl", [{"custom_id": "x", "text": "hello"}])
    run_id = client.submit_run(path, source_lang="en", target_lang="fr", callback_url=url)
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(lambda: len(handler.received) >= 3, "three deliveries (two refused, one taken)")
    assert pg.execute("SELECT webhook_status, webhook_attempts FROM runs WHERE id = %s", (run_id,)).fetchone() == (
        "delivered",
        3,
    )
    headers, body = handler.received[-1]
    expected = hmac.new(b"test-secret", headers["X-Dragoman-Timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["X-Dragoman-Signature"] == f"sha256={expected.hexdigest()}"
    payload = json.loads(body)
    assert payload["event"] == "run.completed" and payload["run"]["id"] == run_id
    assert payload["run"]["counts"]["succeeded"] == 1


def test_callback_needs_a_secret(client: Client, tmp_path: Path) -> None:
    client.settings.webhook_secret = None
    path = write_jsonl(tmp_path / "w.jsonl", [{"custom_id": "x", "text": "hello"}])
    with pytest.raises(Exception, match="DRAGOMAN_WEBHOOK_SECRET"):
        client.submit_run(path, source_lang="en", target_lang="fr", callback_url="http://127.0.0.1:1/x")


@pytest.fixture
def rq_worker_process(settings: Settings) -> Iterator[None]:
    """A real `dragoman rq-worker` process on this test's servers and prefix."""
    import os
    import signal
    import subprocess
    import sys

    assert settings.redis_url and settings.database_url
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "rq-worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    yield
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=FOREVER) == 0


async def test_translate_command_reports_failed_segments(
    start_worker: WorkerFactory, rq_worker_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    source = tmp_path / "notes.md"
    source.write_text("# Title\n\nA good paragraph.\n\nA boom paragraph.\n")
    async with start_worker(DeterministicEngine(fail_if=lambda text: "boom" in text)):
        args = ["translate", str(source), "--from", "en", "--to", "fr", "--no-progress"]
        assert await asyncio.to_thread(main, args) == 1
        err = capsys.readouterr().err
        assert "1 of 3 segments did not translate" in err and "segment 2 (failed)" in err
        assert "'A boom paragraph.'" in err and "nothing written" in err
        assert not (tmp_path / "notes.fr.md").exists()
        assert await asyncio.to_thread(main, [*args, "--keep-failed-source"]) == 0
    assert (tmp_path / "notes.fr.md").read_text() == source.read_text()  # identity engine; failed kept as source


async def test_translate_command_writes_a_word_document(
    start_worker: WorkerFactory, rq_worker_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    source = tmp_path / "report.docx"
    source.write_bytes(make_docx())
    async with start_worker(DeterministicEngine(rewrite=_shout_or_lose)):
        args = ["translate", str(source), "--from", "en", "--to", "fr", "--no-progress"]
        assert await asyncio.to_thread(main, args) == 0
    assert "inline markup: 2 segments with placeholder tags, 2 kept them" in capsys.readouterr().err
    archive = zipfile.ZipFile(tmp_path / "report.fr.docx")
    assert b"CLICK </w:t>" in archive.read("word/document.xml")
    assert archive.read("word/media/image1.png") == b"\x89PNG not really"


def test_translate_command_rejects_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import EXIT_BAD_INPUT, main

    (tmp_path / "a.pages").write_text("x")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "empty.md").write_text("  \n")
    for name, message in (
        ("a.pages", "use --format"),
        ("bin.txt", "not UTF-8"),
        ("empty.md", "empty"),
        ("missing.txt", "no such file"),
    ):
        assert main(["translate", str(tmp_path / name), "--from", "en", "--to", "fr"]) == EXIT_BAD_INPUT
        assert message in capsys.readouterr().err


def test_a_document_cancelled_before_it_is_split_submits_nothing(client: Client, raw_redis: redis.Redis) -> None:
    document_id = client.submit_document("Some text.\n", "txt", "en", "fr")
    client.cancel_document(document_id)
    run_orchestrator()
    assert client.get_document(document_id).status == "cancelled"
    assert raw_redis.xlen(client.keys.jobs_stream) == 0


def _shout_or_lose(text: str, request: Any) -> str:
    """Capitals with the tags kept, except for a text with "lose" in it, whose tags are lost every time."""
    shouted = "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tag_tokens(text))
    return re.sub(r"</?x\d+/?>", "", shouted) if "lose" in text else shouted


async def test_inline_markup_round_trips_and_the_report_names_the_fallbacks(
    start_worker: WorkerFactory, client: Client, pg: Any
) -> None:
    source = '<p>Click <a href="/x">here</a> now.</p><p>We <b>lose</b> tags here.</p><p>Plain.</p>'
    document_id = client.submit_document(source, "html", "en", "fr")
    async with start_worker(DeterministicEngine(rewrite=_shout_or_lose)):
        await orchestrate_until(
            lambda: client.get_document(document_id).status == "completed", "the document completed"
        )
    result = client.document_result(document_id)
    assert result.text == '<p>CLICK <a href="/x">HERE</a> NOW.</p><p>WE <b>LOSE</b> TAGS HERE.</p><p>PLAIN.</p>'
    assert result.report is not None
    assert result.report["with_tags"] == 2 and result.report["tags_kept"] == 1 and result.report["failed"] == 0
    assert result.report["fell_back"] == [{"segment": 1, "source": "We <x1>lose</x1> tags here."}]
    rows = pg.execute(
        "SELECT sequence, inline_tags, source_text FROM jobs WHERE document_id = %s ORDER BY sequence", (document_id,)
    ).fetchall()
    assert rows == [
        (0, "kept", "Click <x1>here</x1> now."),
        (1, "fallback", "We <x1>lose</x1> tags here."),
        (2, None, "Plain."),
    ]
