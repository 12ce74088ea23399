"""The rq-worker logs a refused document and a failed webhook as one line each, saying what and why: no traceback.

Before, each wrote a traceback through dragoman's own frames (a receiver down for an hour: one per try),
burying the one line an operator needs. A bug (an exception no task raises on purpose) keeps its traceback.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from rq import Queue

from contract.orchestration import WEBHOOK
from contract.settings import Settings
from orchestrator.context import TaskContext
from producer.client import Client
from tests.orchestrator.test_runs_and_documents import BurstWorker, run_orchestrator
from tests.orchestrator.test_webhooks import Receiver

pytestmark = pytest.mark.timeout(120)


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record that carries a traceback, as an exception or as text (RQ writes it into its message)."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.exc_info or "Traceback (most recent call last)" in record.getMessage()
    ]


def test_a_refused_document_is_one_line_naming_it_and_why(
    settings_env: Settings, client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A document the splitter refuses (a segment over the job's limit) fails, logged as one warning line."""
    monkeypatch.setenv("DRAGOMAN_MAX_TEXT_CHARS", "50")
    source = f"<p>Too long a sentence: {'word ' * 30}end.</p>\n"
    document_id = client.submit_document(source, "html", "en", "fr", max_segment_chars=500)
    caplog.set_level(logging.INFO)
    run_orchestrator()
    assert client.get_document(document_id).status == "failed"
    lines = [r for r in caplog.records if document_id in r.getMessage() and "failed" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.WARNING
    assert "over the limit of 50" in lines[0].getMessage()
    assert tracebacks(caplog) == []


def test_a_failed_webhook_is_one_line_naming_the_receiver_and_its_answer(
    settings_env: Settings,
    client: Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """A receiver answering 500: the delivery fails (RQ retries it while it has tries), one line per try."""
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_SECRET", "s3cret")
    monkeypatch.setenv("DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS", '["127.0.0.0/8"]')
    client.settings.webhook_secret = "s3cret"
    receiver = Receiver(answer=500)
    try:
        lines = tmp_path / "run.jsonl"
        lines.write_text('{"custom_id": "a", "text": "hello"}\n')
        run_id = client.submit_run(lines, source_lang="en", target_lang="fr", callback_url=receiver.url())
        ctx = TaskContext.from_environment()
        ctx.enqueue(WEBHOOK, "run", run_id)
        caplog.set_level(logging.INFO)
        connection = ctx.rq_connection()
        try:
            BurstWorker([Queue(ctx.keys.webhook_queue, connection=connection)], connection=connection).work(burst=True)
        finally:
            connection.close()
        assert len(receiver.received) == 1
    finally:
        receiver.close()
    failed = [r for r in caplog.records if "deliver_webhook" in r.getMessage() and "failed" in r.getMessage()]
    assert len(failed) == 1, [r.getMessage() for r in caplog.records]
    message = failed[0].getMessage()
    assert failed[0].levelno == logging.WARNING
    assert "WebhookDeliveryError" in message and "answered 500" in message and "RQ tries it again" in message
    assert tracebacks(caplog) == []


def test_a_bug_in_a_task_keeps_its_traceback(settings_env: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """Only typed failures are shortened: an unexpected exception is logged with its traceback, as RQ does."""
    ctx = TaskContext.from_environment()
    connection = ctx.rq_connection()
    try:
        queue = Queue(f"{ctx.keys.webhook_queue}:bug-{uuid.uuid4().hex[:6]}", connection=connection)
        queue.enqueue("json.loads", "not JSON")  # a ValueError: no task raises one on purpose
        caplog.set_level(logging.INFO)
        BurstWorker([queue], connection=connection).work(burst=True)
    finally:
        connection.close()
    assert any("JSONDecodeError" in text for text in tracebacks(caplog)), [r.getMessage() for r in caplog.records]
