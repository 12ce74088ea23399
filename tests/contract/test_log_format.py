"""Log lines: JSON for pipelines, job ids attached, no passwords, whatever logged them."""

from __future__ import annotations

import json
import logging

import pytest

from contract.log_format import JsonLogFormatter, TextLogFormatter, configure_logging, scrub_secrets


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("worker.consumer", logging.WARNING, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_json_line_carries_the_job_id_and_nothing_secret() -> None:
    record = _record("job %s failed: cannot reach %s", "1234", "postgresql://app:hunter2@db:5432/x", job_id="1234")
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING" and entry["logger"] == "worker.consumer" and entry["job_id"] == "1234"
    assert entry["message"] == "job 1234 failed: cannot reach postgresql://app:***@db:5432/x"
    assert entry["ts"].endswith("Z")
    assert "hunter2" not in line


def test_json_line_keeps_the_traceback_on_one_line() -> None:
    try:
        raise RuntimeError("engine fell over")
    except RuntimeError:
        record = logging.LogRecord("w", logging.ERROR, __file__, 1, "oops", None, __import__("sys").exc_info())
    entry = json.loads(JsonLogFormatter().format(record))
    assert "RuntimeError: engine fell over" in entry["exception"]


def test_text_line_appends_job_fields_only() -> None:
    record = _record("dead-lettering entry", entry_id="1-0", job_id=None, vllm_process_name="MainProcess")
    line = TextLogFormatter().format(record)
    assert line.endswith("dead-lettering entry job_id=None entry_id=1-0")


@pytest.mark.parametrize(
    ("raw", "scrubbed"),
    [
        ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
        (
            "rediss://user:p%40ss@host/1 and postgresql://u:pw@h/db",
            "rediss://user:***@host/1 and postgresql://u:***@h/db",
        ),
        ("unix:///tmp/redis.sock?db=0", "unix:///tmp/redis.sock?db=0"),
        ("postgresql://user@host/db", "postgresql://user@host/db"),
        ("redis://u:p@ss@host/0 left", "redis://u:***@host/0 left"),  # an unescaped '@' in the password
        # Query parameters: redis-py and libpq both take the password from the query too.
        ("redis://host:6379/0?password=s3cret", "redis://host:6379/0?password=***"),
        ("postgresql://u@h/db?sslmode=require&password=s3cret", "postgresql://u@h/db?sslmode=require&password=***"),
        ("postgresql://h/db?sslpassword=s3cret&x=1", "postgresql://h/db?sslpassword=***&x=1"),
        ("https://hooks/x?token=abc&X-Amz-Signature=def&id=7", "https://hooks/x?token=***&X-Amz-Signature=***&id=7"),
        # libpq key=value strings, reprs and dict keys.
        ("host=db password=s3cret dbname=x", "host=db password=*** dbname=x"),
        ("host=db password = 'two words' dbname=x", "host=db password = *** dbname=x"),
        ("Settings(webhook_secret='s3cret', max_new_tokens=5)", "Settings(webhook_secret=***, max_new_tokens=5)"),
        ("{'password': 's3cret', \"api_key\": \"k\"}", "{'password': '***', \"api_key\": \"***\"}"),
        # Words that only look alike are left alone.
        ("max_tokens=16 prompt_tokens=3 bypass=1 password authentication failed", None),
    ],
)
def test_scrub_secrets(raw: str, scrubbed: str | None) -> None:
    assert scrub_secrets(raw) == (raw if scrubbed is None else scrubbed)


def test_json_line_stays_valid_with_a_quoted_secret() -> None:
    record = _record('connect failed: host=db password="two words" dbname=x')
    entry = json.loads(JsonLogFormatter().format(record))
    assert entry["message"] == "connect failed: host=db password=*** dbname=x"


def test_a_startup_line_with_a_query_password_is_scrubbed() -> None:
    """The worker logged its URLs at start; a password given as ``?password=`` went out as it was."""
    record = _record("redis %s, postgres %s", "redis://cache:6379/0?password=s3cret", "postgresql://h/db?password=pw2")
    for formatter in (TextLogFormatter(), JsonLogFormatter()):
        line = formatter.format(record)
        assert "s3cret" not in line and "pw2" not in line and "password=***" in line


def test_configure_logging_rejects_unknown_formats() -> None:
    with pytest.raises(ValueError, match="text, json"):
        configure_logging("INFO", "xml")  # type: ignore[arg-type]
