"""The dragoman CLI: what it prints and what its exit codes mean."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from cli.main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, main
from contract.settings import Settings


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """Every command here reads the test's servers from the environment."""


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
    [
        ["submit", "   ", "--from", "en", "--to", "fr"],
        ["submit", "Hi", "--from", "en", "--to", "xx"],
        ["submit", "Hi", "--from", "en", "--to", "fr", "--metadata", "[1]"],
        ["status", "not-a-uuid"],
    ],
)
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


def test_check_is_unhealthy_without_a_worker_and_healthy_with_one(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    import socket

    import redis as redis_module

    from broker.keys import RedisKeys

    assert main(["check", "--services-only"]) == EXIT_OK
    assert main(["check"]) == EXIT_ERROR
    assert "no live heartbeat" in capsys.readouterr().err

    assert settings.redis_url
    connection = redis_module.Redis.from_url(settings.redis_url, decode_responses=True)
    key = RedisKeys.from_settings(settings).worker(f"{socket.gethostname()}-1-abc")
    connection.hset(key, mapping={"in_flight": 3, "written": 10, "reclaimed": 0, "postgres_down_since": ""})
    assert main(["check"]) == EXIT_OK
    assert "3 in flight" in capsys.readouterr().out
    connection.hset(key, "postgres_down_since", "1000")
    assert main(["check"]) == EXIT_ERROR
    assert "cannot write to PostgreSQL" in capsys.readouterr().err
    connection.delete(key)
    connection.close()


def test_dead_letter_commands(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    import redis as redis_module

    from broker.keys import RedisKeys

    keys = RedisKeys.from_settings(settings)
    assert settings.redis_url
    connection = redis_module.Redis.from_url(settings.redis_url, decode_responses=True)
    job_id = str(uuid.uuid4())
    payload = json.dumps({"text": "Hi", "source_lang": "en", "target_lang": "fr"})
    connection.xadd(keys.dead_letter_stream, {"v": "1", "id": job_id, "payload": payload, "reason": "EngineError: x"})
    bad_id = connection.xadd(keys.dead_letter_stream, {"garbage": "1", "reason": "unsupported schema version None"})

    assert main(["dead", "list"]) == EXIT_OK
    out = capsys.readouterr().out
    assert job_id in out and "EngineError: x" in out and "2 dead letters shown" in out

    assert main(["dead", "retry", bad_id]) == EXIT_BAD_INPUT
    assert "cannot be retried" in capsys.readouterr().err
    assert main(["dead", "retry", str(uuid.uuid4())]) == EXIT_NOT_FOUND
    assert main(["dead", "retry", job_id]) == EXIT_OK
    assert connection.xlen(keys.jobs_stream) == 1
    assert connection.hget(keys.state(job_id), "status") == "queued"

    assert main(["dead", "purge"]) == EXIT_OK
    assert "purged 1" in capsys.readouterr().out
    connection.close()
