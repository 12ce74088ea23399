"""The dragoman CLI: what it prints and what its exit codes mean."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from producer.cli import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, main
from producer.settings import Settings


@pytest.fixture(autouse=True)
def _env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.redis_url and settings.database_url
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("DRAGOMAN_KEY_PREFIX", settings.key_prefix)
    monkeypatch.setenv("DRAGOMAN_DATA_DIR", str(settings.data_dir))


def test_submit_status_cancel(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "Hello world", "--from", "en", "--to", "fr"]) == EXIT_OK
    job_id = capsys.readouterr().out.strip()
    assert uuid.UUID(job_id)

    assert main(["status", job_id]) == EXIT_OK
    out = capsys.readouterr().out
    assert "status       queued" in out and "en -> fr" in out

    assert main(["status", job_id, "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["status"] == "queued"

    assert main(["cancel", job_id]) == EXIT_OK
    assert "cancelled" in capsys.readouterr().out


def test_submit_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("From standard input\n"))
    assert main(["submit", "--from", "en", "--to", "de", "--metadata", '{"src": "stdin"}']) == EXIT_OK
    assert uuid.UUID(capsys.readouterr().out.strip())


@pytest.mark.parametrize(
    "argv",
    [["submit", "   ", "--from", "en", "--to", "fr"],
     ["submit", "Hi", "--from", "en", "--to", "xx"],
     ["submit", "Hi", "--from", "en", "--to", "fr", "--metadata", "[1]"],
     ["status", "not-a-uuid"]],
)  # fmt: skip
def test_bad_input_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("error: ")


def test_unknown_job_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(uuid.uuid4())]) == EXIT_NOT_FOUND
    assert "no job with id" in capsys.readouterr().err


def test_wait_timeout_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "Hi", "--from", "en", "--to", "fr", "--wait", "--timeout", "0.2"]) == EXIT_ERROR
    assert "still queued" in capsys.readouterr().err


def test_no_services_exits_1(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRAGOMAN_REDIS_URL")
    assert main(["status", str(uuid.uuid4())]) == EXIT_ERROR
    assert "dragoman services up" in capsys.readouterr().err
