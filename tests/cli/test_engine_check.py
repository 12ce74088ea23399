"""The engine commands on a base install (no vLLM): the extra to install, exit 2, nothing started.

The engine import is made to fail with ``sys.modules[name] = None`` (what Python does for a module
known to be missing), so these run on any install, the full one included.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli import demo as demo_module
from cli import worker as worker_cli
from cli.main import EXIT_BAD_INPUT, EXIT_ERROR, main
from contract.errors import EngineNotInstalledError, ServiceError
from contract.services import ServiceUrls
from contract.settings import Settings
from storage.embedded import EmbeddedServices
from worker.extras import ENGINE_MODULES, MODEL_BUILD_MODULES, missing_modules, require_engine
from worker.vllm_engine import VllmEngine


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``import module`` (and ``find_spec``) fail for each of ``modules``, as on a base install."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No service URLs (so the worker would start the embedded ones) and nothing prepared; starting is refused."""
    monkeypatch.delenv("DRAGOMAN_REDIS_URL", raising=False)
    monkeypatch.delenv("DRAGOMAN_DATABASE_URL", raising=False)
    monkeypatch.setenv("DRAGOMAN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DRAGOMAN_MODEL_CACHE_DIR", str(tmp_path / "models"))

    def refuse(self: EmbeddedServices) -> ServiceUrls:
        raise AssertionError("the embedded services were started")

    monkeypatch.setattr(EmbeddedServices, "up", refuse)
    return tmp_path / "data"


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["worker"], "dragoman worker"),
        (["worker", "--model", "/models/mine"], "dragoman worker"),
        (["demo"], "dragoman demo"),
    ],
)
def test_engine_commands_without_vllm_name_the_extra_and_start_nothing(
    argv: list[str], command: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _hide(monkeypatch, *ENGINE_MODULES)

    assert main(argv) == EXIT_BAD_INPUT

    err = capsys.readouterr().err
    assert err.startswith(f"error: `{command}` needs the engine extra")
    assert "missing modules: vllm" in err
    assert "pip install 'dragoman[cpu]'" in err and "pip install 'dragoman[gpu]'" in err
    assert "Traceback" not in err and "Nothing was started" in err
    assert not data_dir.exists()  # no Redis, no PostgreSQL, no migrations: nothing was written there


def test_the_default_model_needs_its_builders_too(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _hide(monkeypatch, "torch", "transformers")

    assert main(["worker"]) == EXIT_BAD_INPUT  # vLLM is there, but the default model cannot be built
    assert "missing modules: torch, transformers" in capsys.readouterr().err
    assert main(["model", "prepare"]) == EXIT_BAD_INPUT
    assert "`dragoman model prepare` needs the engine extra" in capsys.readouterr().err
    assert not data_dir.exists()


def test_a_model_path_needs_only_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _hide(monkeypatch, *MODEL_BUILD_MODULES)
    require_engine("dragoman worker", build_default_model=False)  # vLLM is all it needs
    with pytest.raises(EngineNotInstalledError):
        require_engine("dragoman worker", build_default_model=True)


def test_missing_modules_finds_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "vllm")
    assert missing_modules(("json", "vllm", "no_such_module_dragoman")) == ["vllm", "no_such_module_dragoman"]


def test_the_engine_seam_guards_its_import(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A library caller that skips the CLI's check gets the same advice, not a raw ModuleNotFoundError."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    _hide(monkeypatch, "vllm")
    with pytest.raises(EngineNotInstalledError, match=r"dragoman\[cpu\]"):
        VllmEngine.start(model)


def _fake_services(monkeypatch: pytest.MonkeyPatch, *, started: bool) -> None:
    monkeypatch.setattr(worker_cli, "require_engine_for", lambda command, settings, model: None)
    monkeypatch.setattr(worker_cli, "resolve_model", lambda settings, model: Path("/models/fake"))
    monkeypatch.setattr(worker_cli, "starts_embedded_services", lambda settings: started)
    monkeypatch.setattr(
        "storage.embedded.ensure_services", lambda settings: ServiceUrls("redis://fake", "postgresql://fake")
    )


@pytest.mark.parametrize("started", [True, False])
def test_a_worker_that_started_the_services_and_fails_says_how_to_stop_them(
    started: bool, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_services(monkeypatch, started=started)

    def fail(*args: object) -> int:
        raise ServiceError("the engine could not start")

    monkeypatch.setattr(worker_cli, "_run_worker", fail)
    assert main(["worker"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "error: the engine could not start" in err
    assert ("`dragoman services down` stops them" in err) is started  # only what this command started


def test_a_worker_exiting_non_zero_says_it_too(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_services(monkeypatch, started=True)
    monkeypatch.setattr(worker_cli, "_run_worker", lambda *args: 1)  # e.g. the engine died
    assert main(["worker"]) == 1
    assert "`dragoman services down`" in capsys.readouterr().err

    monkeypatch.setattr(worker_cli, "_run_worker", lambda *args: 0)  # a clean SIGTERM: no hint
    assert main(["worker"]) == 0
    assert "services down" not in capsys.readouterr().err


def test_the_demo_stops_the_services_it_started_when_it_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stopped: list[Path] = []
    monkeypatch.setattr(demo_module, "starts_embedded_services", lambda settings: True)
    monkeypatch.setattr(demo_module, "ensure_services", lambda settings: ServiceUrls("redis://x", "postgresql://x"))
    monkeypatch.setattr(EmbeddedServices, "down", lambda self: stopped.append(self.data_dir) or True)

    def fail(url: str) -> None:
        raise ServiceError("migrations failed")

    monkeypatch.setattr(demo_module, "upgrade_database", fail)
    settings = Settings(data_dir=tmp_path / "data")
    with pytest.raises(ServiceError):
        demo_module.run_demo(settings, sys.executable)
    assert stopped == [(tmp_path / "data").resolve()]
