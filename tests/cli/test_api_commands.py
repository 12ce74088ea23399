"""``dragoman api-key create|list|revoke`` and the ``dragoman api`` parser."""

from __future__ import annotations

import hashlib
import json

import pytest

from cli.main import EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_OK, build_parser, main
from contract.settings import Settings


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """Every command here reads the test's servers from the environment."""


def test_create_list_revoke(capsys: pytest.CaptureFixture[str], pg: object, settings: Settings) -> None:
    name = f"cli-{settings.key_prefix}"
    assert main(["api-key", "create", name, "--tenant", "acme", "--rate-limit", "30"]) == EXIT_OK
    secret, note = capsys.readouterr().out.strip().splitlines()
    assert secret.startswith("dgm_") and len(secret) > 40 and "shown this once" in note
    key_id = note.split()[1].strip(",")
    stored = pg.execute("SELECT key_hash, tenant FROM api_keys WHERE id = %s", (key_id,)).fetchone()  # type: ignore[attr-defined]
    assert stored == (hashlib.sha256(secret.encode()).hexdigest(), "acme")  # only the hash is kept

    assert main(["api-key", "list", "--json"]) == EXIT_OK
    [listed] = [k for k in json.loads(capsys.readouterr().out) if k["id"] == key_id]
    assert listed["tenant"] == "acme" and listed["rate_limit_per_minute"] == 30 and listed["revoked_at"] is None
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
    assert (args.host, args.port) == ("0.0.0.0", 9000)
    defaults = Settings()
    assert (defaults.api_host, defaults.api_port) == ("127.0.0.1", 8000)
