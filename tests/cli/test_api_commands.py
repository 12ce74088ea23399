"""``dragoman api-key create|list|revoke`` and the ``dragoman api`` parser."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from cli.demo_api import SENTENCE, show_curl_round_trip
from cli.main import EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_OK, build_parser, main
from contract.settings import Settings
from tests.worker.conftest import WorkerFactory, start_worker
from worker.deterministic_engine import DeterministicEngine

__all__ = ["start_worker"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """Every command here reads the test's servers from the environment."""


def test_create_list_revoke(capsys: pytest.CaptureFixture[str], pg: object, settings: Settings) -> None:
    name = f"cli-{settings.key_prefix}"
    assert (
        main(["api-key", "create", name, "--tenant", "acme", "--rate-limit", "30", "--max-queued-jobs", "500"])
        == EXIT_OK
    )
    secret, note = capsys.readouterr().out.strip().splitlines()
    assert secret.startswith("dgm_") and len(secret) > 40 and "shown this once" in note
    key_id = note.split()[1].strip(",")
    stored = pg.execute("SELECT key_hash, tenant FROM api_keys WHERE id = %s", (key_id,)).fetchone()  # type: ignore[attr-defined]
    assert stored == (hashlib.sha256(secret.encode()).hexdigest(), "acme")  # only the hash is kept

    assert main(["api-key", "list", "--json"]) == EXIT_OK
    [listed] = [k for k in json.loads(capsys.readouterr().out) if k["id"] == key_id]
    assert listed["tenant"] == "acme" and listed["rate_limit_per_minute"] == 30 and listed["revoked_at"] is None
    assert listed["max_queued_jobs"] == 500
    assert secret not in json.dumps(listed)
    assert main(["api-key", "list"]) == EXIT_OK
    assert key_id in capsys.readouterr().out

    assert main(["api-key", "revoke", key_id]) == EXIT_OK
    assert f"revoked {key_id}" in capsys.readouterr().out
    assert main(["api-key", "list", "--json"]) == EXIT_OK
    assert key_id not in capsys.readouterr().out
    assert main(["api-key", "list", "--json", "--all"]) == EXIT_OK
    [revoked] = [k for k in json.loads(capsys.readouterr().out) if k["id"] == key_id]
    assert revoked["revoked_at"] is not None

    assert main(["api-key", "revoke", key_id]) == EXIT_NOT_FOUND  # already revoked
    assert "no active API key" in capsys.readouterr().err


def test_tenant_defaults_to_the_name_and_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["api-key", "create", "globex", "--json"]) == EXIT_OK
    created = json.loads(capsys.readouterr().out)
    assert created["tenant"] == "globex" and created["key"].startswith("dgm_")
    assert main(["api-key", "create", "has spaces"]) == EXIT_BAD_INPUT
    assert "tenant must be" in capsys.readouterr().err
    assert main(["api-key", "create"]) == EXIT_BAD_INPUT
    assert main(["api-key", "revoke", "not-a-uuid"]) == EXIT_NOT_FOUND


def test_api_command_options() -> None:
    args = build_parser().parse_args(["api", "--host", "0.0.0.0", "--port", "9000"])
    assert (args.api_host, args.api_port) == ("0.0.0.0", 9000)
    defaults = Settings()
    assert (defaults.api_host, defaults.api_port) == ("127.0.0.1", 8000)


async def test_the_demos_curl_round_trip_runs_against_a_real_api_process(
    settings: Settings, start_worker: WorkerFactory, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What `make demo` shows: `dragoman api` started, one job submitted and polled with curl."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    env = {**os.environ}
    port = _free_port()
    async with start_worker(DeterministicEngine()):
        code = await asyncio.to_thread(show_curl_round_trip, sys.executable, env, port, tmp_path / "api.log")
    out = capsys.readouterr().out
    assert code == 0, out + (tmp_path / "api.log").read_text()
    assert "$ curl -sS -X POST" in out and '"Authorization: Bearer $KEY"' in out
    assert '"status":"succeeded"' in out.replace(" ", "") and SENTENCE in out
