"""What a new user ran into, tried the way the docs tell it: each test failed before its fix.

``services up`` with both URLs configured, ``run submit``'s resume hint on a refused file,
``run cancel`` and ``cancel`` on something finished, ``check --services-only``, ``stats`` per lane.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from cli.main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, main
from contract.settings import Settings
from producer import Client
from tests.waiting import FOREVER, until
from tests.worker.conftest import WorkerFactory, start_worker
from worker.deterministic_engine import DeterministicEngine

__all__ = ["start_worker"]


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """Every command here reads the test's servers from the environment."""


def test_services_up_with_both_urls_configured_starts_nothing_and_prints_them(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    from storage.embedded import EmbeddedServices

    try:
        assert main(["services", "up"]) == EXIT_OK
    finally:
        started = EmbeddedServices(settings.data_dir).down()  # never leave servers behind, even on failure
    out, err = capsys.readouterr()
    assert not started, "an embedded server was started although both URLs are configured"
    assert f"DRAGOMAN_REDIS_URL={settings.redis_url}" in out.splitlines()
    assert f"DRAGOMAN_DATABASE_URL={settings.database_url}" in out.splitlines()
    assert "no embedded server started" in err

    assert main(["services", "status"]) == EXIT_OK
    assert f"DRAGOMAN_REDIS_URL={settings.redis_url}" in capsys.readouterr().out


def _write_run(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps({"custom_id": f"l{i}", "text": f"Line {i}."}) + "\n" for i in range(count)))
    return path


def test_run_submit_refusing_a_file_prints_no_resume_hint(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"custom_id": "a", "text": "One."}\n{"custom_id": "a"}\n')
    assert main(["run", "submit", str(bad), "--from", "en", "--to", "fr"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--run-id" not in err, "a resume hint for a run that was never created"
    assert "line 2" in err


def test_run_submit_prints_the_resume_hint_once_part_of_the_run_is_queued(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAGOMAN_SUBMIT_CHUNK_SIZE", "2")
    assert main(["run", "submit", str(_write_run(tmp_path / "lines.jsonl", 5)), "--from", "en", "--to", "fr"]) == 0
    out, err = capsys.readouterr()
    run_id = out.strip()
    assert err.count(f"--run-id {run_id}") == 1, err
    assert main(["run", "status", run_id]) == EXIT_OK

    # One chunk: queued in one go, nothing to resume.
    monkeypatch.setenv("DRAGOMAN_SUBMIT_CHUNK_SIZE", "100")
    assert main(["run", "submit", str(_write_run(tmp_path / "small.jsonl", 3)), "--from", "en", "--to", "fr"]) == 0
    assert "--run-id" not in capsys.readouterr().err


@pytest.mark.timeout(60)
async def test_cancel_on_something_finished_exits_1_for_a_job_and_a_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, settings: Settings, start_worker: WorkerFactory
) -> None:
    run_file = _write_run(tmp_path / "lines.jsonl", 2)
    with Client(settings) as client:
        job_id = client.submit("Hello.", "en", "fr")
        run_id = client.submit_run(run_file, source_lang="en", target_lang="fr")
        async with start_worker(DeterministicEngine()):
            await asyncio.to_thread(client.wait, job_id, timeout=FOREVER)
            await until(lambda: client.get_run(run_id).counts.pending == 0, "the run's lines finished")
    capsys.readouterr()
    assert main(["cancel", job_id]) == EXIT_ERROR
    assert main(["run", "cancel", run_id]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert re.search(rf"run {run_id} already finished .*nothing left to cancel", err), err


def test_run_cancel_twice_is_not_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", "submit", str(_write_run(tmp_path / "lines.jsonl", 2)), "--from", "en", "--to", "fr"]) == 0
    run_id = capsys.readouterr().out.strip()
    assert main(["run", "cancel", run_id]) == EXIT_OK
    assert main(["run", "cancel", run_id]) == EXIT_OK


def test_check_services_only_prints_no_worker_line(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    import socket

    import redis as redis_module

    from broker.keys import RedisKeys

    assert settings.redis_url
    connection = redis_module.Redis.from_url(settings.redis_url, decode_responses=True)
    key = RedisKeys.from_settings(settings).worker(f"{socket.gethostname()}-1-abc")
    connection.hset(key, mapping={"in_flight": 3, "written": 10, "reclaimed": 0, "postgres_down_since": ""})
    try:
        assert main(["check", "--services-only"]) == EXIT_OK
        assert "worker" not in capsys.readouterr().out
        assert main(["check"]) == EXIT_OK
        assert "worker      " in capsys.readouterr().out
    finally:
        connection.delete(key)
        connection.close()


def test_stats_shows_the_length_of_both_lanes(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    from broker.keys import RedisKeys

    keys = RedisKeys.from_settings(settings)
    with Client(settings) as client:
        client.submit("Hello.", "en", "fr")
        for _ in range(3):
            client.submit("Bulk.", "en", "fr", lane="bulk")
    assert main(["stats"]) == EXIT_OK
    out = capsys.readouterr().out
    assert re.search(rf"stream {re.escape(keys.jobs_stream)} +length 1 ", out), out
    assert re.search(rf"stream {re.escape(keys.bulk_jobs_stream)} +length 3 ", out), out
    assert "every lane, length 4" in out
