"""``--help`` everywhere: every command says what it does, every argument has a help, ids get an example."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator

import pytest

from cli.main import build_parser, main, parse_command_line
from contract.version import dragoman_version


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command and sub-command (``("run", "submit")``), the top level as ``()``."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


def _parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


COMMANDS = list(_commands(build_parser()))
ID_ARGUMENTS = ("job_id", "run_id", "ident")


def test_the_tree_is_walked() -> None:
    assert ("cancel",) in COMMANDS and ("run", "results") in COMMANDS and ("worker",) in COMMANDS
    assert len(COMMANDS) > 15


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "dragoman")
def test_every_command_and_argument_has_a_help(path: tuple[str, ...]) -> None:
    parser = _parser(path)
    assert parser.description and parser.description.strip(), f"`dragoman {' '.join(path)}` has no description"
    for action in parser._actions:
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip() and action.help != argparse.SUPPRESS, f"{name} has no help"
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # the one-line list in the parent's --help
                assert choice.help and choice.help.strip(), f"{choice.dest} has no one-line help"
    text = parser.format_help()
    assert "\r" not in text


@pytest.mark.parametrize(
    "path", [p for p in COMMANDS if any(a.dest in ID_ARGUMENTS for a in _parser(p)._actions)], ids=" ".join
)
def test_commands_taking_an_id_show_an_example(path: tuple[str, ...]) -> None:
    epilog = _parser(path).epilog or ""
    assert epilog.startswith("examples:\n")
    assert any(line.strip().startswith(f"dragoman {' '.join(path)} ") for line in epilog.splitlines()[1:])


def _example_lines(epilog: str | None) -> list[str]:
    assert epilog and epilog.startswith("examples:\n")
    return [line.strip() for line in epilog.splitlines()[1:]]


def test_top_level_help_ends_with_three_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    lines = capsys.readouterr().out.rstrip("\n").splitlines()
    assert lines[-4] == "examples:"
    assert all(line.startswith("  dragoman ") for line in lines[-3:])


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "dragoman")
def test_every_example_parses(path: tuple[str, ...]) -> None:
    """The examples are real invocations: each one parses (shell redirections and pipes aside)."""
    epilog = _parser(path).epilog
    if epilog is None:
        pytest.skip("no examples")
    for example in _example_lines(epilog):
        words = shlex.split(example.split("|")[-1])
        words = words[: next((i for i, w in enumerate(words) if w in (">", "2>&1", "&")), len(words))]
        assert words[0] == "dragoman", example
        args = parse_command_line(words[1:])
        if getattr(args, "engine_args", None):  # vLLM's: its own parser must take them too
            from worker.engine_args import parse_engine_args

            parse_engine_args(args.engine_args, on_cpu=False)


def test_cancel_help_says_what_happens_to_queued_and_running_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cancel", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "A queued job is cancelled at once" in text
    assert "A running job is aborted in the engine" in text
    assert "already succeeded or failed cannot be cancelled" in text


def test_dead_help_describes_each_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["dead", "--help"])
    lines = capsys.readouterr().out.splitlines()
    for action in ("list:", "retry ID:", "purge:"):
        line = next(line for line in lines if line.strip().startswith(action))
        assert len(line.split(":", 1)[1].strip()) > 20, line


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"dragoman {dragoman_version()}\n"


_LONG_ENGINE_HELP = """\
import sys

import worker.engine_args as engine_args
import worker.extras as extras

extras.require_engine = lambda *args, **kwargs: None
LINE = "  --an-argument  " + "x" * 64 + "\\n"
engine_args.engine_help = lambda: "usage: dragoman worker [engine arguments]\\n" + LINE * 2_000
from cli.main import main

sys.exit(main(["worker", "--help-engine"]))
"""
"""``dragoman worker --help-engine`` with a help as long as vLLM's (over 64 KiB, more than a pipe holds) standing in
for it: vLLM's own help, and its import of about ten seconds, are tests/worker/test_engine_arguments.py's."""


def test_a_reader_that_stops_reading_is_not_an_error() -> None:
    """``dragoman worker --help-engine | head``: the help is longer than a pipe holds, head closes it."""
    import subprocess
    import sys

    program = f"{shlex.quote(sys.executable)} -c {shlex.quote(_LONG_ENGINE_HELP)}"
    done = subprocess.run(
        ["bash", "-c", f"{program} | head -n 1; exit ${{PIPESTATUS[0]}}"], capture_output=True, text=True
    )
    assert done.stdout.startswith("usage: dragoman worker")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0
