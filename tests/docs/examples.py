"""The fenced code blocks of README.md and docs/: which are examples, and how each is marked.

A shell (``bash``, ``sh``, ``shell``, ``console``) or Python (``python``, ``py``) block is an
example, and every example runs as a test unless an HTML comment right above it says otherwise:

- ``<!-- test: skip: REASON -->``: it cannot run here (docker, kubectl, a GPU, the real model);
- ``<!-- test: elsewhere: TEST REASON -->``: a named test runs it with checks of its own;
- ``<!-- test: output contains "TEXT" -->``: it runs, and its page's output must contain TEXT;
- ``<!-- test: needs api -->``: it runs with ``dragoman api`` started and ``DRAGOMAN_API_KEY`` set.

Any other fenced block (``text``, ``json``, ``markdown``...) is shown, never run. A ``console``
block is a transcript: its ``$ `` lines are the commands that run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
PYTHON_LANGUAGES = frozenset({"python", "py"})
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*test:\s*(?P<body>.*?)\s*-->\s*$")
_OUTPUT = re.compile(r'^output contains "(?P<text>.*)"$')


class MarkerError(ValueError):
    """A ``<!-- test: ... -->`` comment the harness does not understand (a typo must not skip a block)."""


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text and the markers above it."""

    path: Path
    line: int
    language: str
    code: str
    skip: str | None = None
    elsewhere: str | None = None
    expected_output: tuple[str, ...] = ()
    needs: frozenset[str] = field(default_factory=frozenset)

    @property
    def kind(self) -> str | None:
        """``shell`` or ``python`` for an example, ``None`` for a block that is only shown."""
        if self.language in SHELL_LANGUAGES:
            return "shell"
        if self.language in PYTHON_LANGUAGES:
            return "python"
        return None

    @property
    def runs_here(self) -> bool:
        """Whether the docs harness runs it (an example neither skipped nor run by another test)."""
        return self.kind is not None and self.skip is None and self.elsewhere is None

    @property
    def where(self) -> str:
        """``docs/guides/runs.md:12``: for messages."""
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"

    def script(self) -> str:
        """The code to run: a ``console`` transcript's commands only, any other block as it is."""
        if self.language != "console":
            return self.code
        return "\n".join(line[2:] for line in self.code.splitlines() if line.startswith("$ ")) + "\n"


def documentation_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


@dataclass
class _Markers:
    skip: str | None = None
    elsewhere: str | None = None
    expected_output: list[str] = field(default_factory=list)
    needs: set[str] = field(default_factory=set)


def _apply_marker(body: str, markers: _Markers) -> None:
    if body.startswith("skip:"):
        markers.skip = body.removeprefix("skip:").strip() or _missing("skip")
    elif body.startswith("elsewhere:"):
        markers.elsewhere = body.removeprefix("elsewhere:").strip() or _missing("elsewhere")
    elif match := _OUTPUT.match(body):
        markers.expected_output.append(match.group("text"))
    elif body.startswith("needs "):
        markers.needs.update(body.removeprefix("needs ").replace(",", " ").split())
    else:
        raise MarkerError(f"unknown test marker {body!r}")


def _missing(what: str) -> str:
    raise MarkerError(f"a `test: {what}:` marker needs a reason")


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file, with the markers in the comments right above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        start = index + 1
        indent, fence = opening.group("indent"), opening.group("fence")
        language = (opening.group("info").strip().split() or [""])[0]
        markers = _Markers()
        above = index - 1
        while above >= 0 and (marker := _MARKER.match(lines[above])):
            try:
                _apply_marker(marker.group("body"), markers)
            except MarkerError as exc:
                raise MarkerError(f"{path}:{above + 1}: {exc}") from None
            above -= 1
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            body.append(lines[index].removeprefix(indent))
            index += 1
        found.append(
            Block(
                path=path,
                line=start,
                language=language,
                code="\n".join(body) + "\n",
                skip=markers.skip,
                elsewhere=markers.elsewhere,
                expected_output=tuple(markers.expected_output),
                needs=frozenset(markers.needs),
            )
        )
        index += 1
    return found


def examples(root: Path = ROOT) -> list[Block]:
    """Every shell and Python block of the documentation, run here or not."""
    return [block for path in documentation_files(root) for block in blocks(path) if block.kind is not None]
