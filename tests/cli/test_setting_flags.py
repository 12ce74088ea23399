"""One precedence rule for every command: a flag the user gave > the DRAGOMAN_* variable > the default."""

from __future__ import annotations

import argparse

import pytest

from cli.main import EXIT_BAD_INPUT, build_parser, main, parse_command_line
from cli.setting_flags import SETTING_FLAGS, mirror_settings, overlay_flags
from contract.settings import Settings


def _settings(*argv: str) -> Settings:
    """The settings a command runs with, as main() builds them."""
    return overlay_flags(Settings(), parse_command_line(list(argv)))


@pytest.mark.parametrize(
    ("command", "flag", "setting", "variable", "from_variable", "from_flag"),
    [
        ("api", "--port=9000", "api_port", "9100", 9100, 9000),
        ("api", "--host=0.0.0.0", "api_host", "10.0.0.5", "10.0.0.5", "0.0.0.0"),
        ("api", "--log-format=text", "log_format", "json", "json", "text"),
        ("rq-worker", "--log-format=text", "log_format", "json", "json", "text"),
        ("worker", "--lane-policy=interactive", "lane_policy", "bulk", "bulk", "interactive"),
        ("worker", "--max-in-flight=300", "max_in_flight", "7", 7, 300),
        ("worker", "--engine=vllm", "engine", "echo", "echo", "vllm"),
        ("worker", "--echo-delay-ms=25", "echo_delay_ms", "3", 3.0, 25.0),
        ("worker", "--log-format=json", "log_format", "text", "text", "json"),
    ],
)
def test_a_flag_beats_the_variable_which_beats_the_default(
    command: str,
    flag: str,
    setting: str,
    variable: str,
    from_variable: object,
    from_flag: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "DRAGOMAN_" + setting.upper()
    monkeypatch.delenv(name, raising=False)
    assert getattr(_settings(command), setting) == Settings.model_fields[setting].default  # neither: the default
    assert getattr(_settings(command, flag), setting) == from_flag  # the flag alone
    monkeypatch.setenv(name, variable)
    assert getattr(_settings(command), setting) == from_variable  # the variable, no flag
    assert getattr(_settings(command, flag), setting) == from_flag  # the flag, over the variable


def test_a_flag_left_out_keeps_the_variables_value_and_others_are_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_API_HOST", "10.0.0.5")
    monkeypatch.setenv("DRAGOMAN_API_PORT", "9100")
    settings = _settings("api", "--port", "0")  # 0 is a value (any free port), not "not given"
    assert (settings.api_host, settings.api_port) == ("10.0.0.5", 0)


def test_a_flag_value_the_setting_refuses_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--max-in-flight", "0"]) == EXIT_BAD_INPUT
    assert "max_in_flight" in capsys.readouterr().err


def test_every_mirrored_flag_names_a_setting_and_has_no_default_of_its_own() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    mirrored = 0
    for command in subparsers.choices.values():
        names = command.get_default(SETTING_FLAGS) or ()
        for name in names:
            [action] = [a for a in command._actions if a.dest == name]
            assert action.default is None, (command.prog, name)  # None: not given, the variable stands
            mirrored += 1
    assert mirrored >= 8
    with pytest.raises(ValueError, match="no_such_setting"):
        mirror_settings(argparse.ArgumentParser(), "no_such_setting")
