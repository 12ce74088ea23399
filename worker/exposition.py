"""Several processes' ``/metrics`` pages merged into one Prometheus exposition, each sample labelled.

An engine group's parent serves one ``/metrics`` for all its engines (:mod:`worker.engine_group_ops`):
every engine's samples get an ``engine="<name>"`` label, and each metric family's ``# HELP`` and
``# TYPE`` lines appear once, followed by the family's samples from every engine (the text format
wants a family's lines together).

Sample lines are read with a small scanner rather than a regular expression: label values may hold
escaped quotes, commas, braces and backslashes (``a="x\\",}{"``), which a pattern over the line gets
wrong. Label values are copied as written (never unescaped and escaped again), so what a child wrote
is what Prometheus reads. The classic format (``name{a="b"} value [timestamp]``) is what the workers
serve; the quoted names of text format 1.0.0 (``{"name.with.dots",a="b"} 1``) are understood too, and
an OpenMetrics ``# EOF`` line, like any comment other than ``# HELP`` and ``# TYPE``, is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contract.errors import DragomanError

SAMPLE_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total", "_info", "_gcount", "_gsum")
"""Endings of a family's sample names beyond the family's own name (histograms, summaries, counters)."""

_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = _NAME_START | frozenset("0123456789")


class ExpositionError(DragomanError, ValueError):
    """A line of a ``/metrics`` page is not in the Prometheus text format (the message says where and why)."""


def escape_label_value(value: str) -> str:
    """``value`` as the text format writes a label value between its quotes (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _unquote(token: str) -> str:
    """A name as written (bare, or quoted with escapes) as the name itself."""
    if not token.startswith('"'):
        return token
    out: list[str] = []
    chars = iter(token[1:-1])
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            out.append("\n" if escaped == "n" else escaped)
        else:
            out.append(char)
    return "".join(out)


class _Scanner:
    """A cursor over one line, with the few tokens the text format has."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.pos = 0

    def fail(self, what: str) -> ExpositionError:
        """An error naming the column and the line."""
        return ExpositionError(f"{what} at column {self.pos + 1} of {self.line!r}")

    def peek(self) -> str:
        """The next character, or ``""`` at the end."""
        return self.line[self.pos : self.pos + 1]

    def skip_spaces(self) -> None:
        """Past spaces and tabs."""
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def take(self, char: str) -> None:
        """Past ``char``, which must come next."""
        if self.peek() != char:
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def bare_name(self) -> str:
        """A metric or label name without quotes (``""`` if none starts here)."""
        start = self.pos
        if self.peek() and self.peek() in _NAME_START:
            self.pos += 1
            while self.peek() and self.peek() in _NAME_CHARS:
                self.pos += 1
        return self.line[start : self.pos]

    def quoted(self) -> str:
        """A double-quoted string with its quotes and escapes, as written."""
        start = self.pos
        self.take('"')
        while True:
            char = self.peek()
            if not char:
                self.pos = start
                raise self.fail("unterminated quoted string")
            self.pos += 2 if char == "\\" else 1
            if char == '"':
                return self.line[start : self.pos]


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample line: its name and labels as written, and the value (and timestamp) after them."""

    name: str
    """The metric name as written: bare (``foo_total``), or quoted (``"foo.total"``) inside the braces."""
    labels: tuple[tuple[str, str], ...]
    """``(name, value)`` pairs as written: the value with its quotes and escapes."""
    value: str
    """What follows the labels: the value and an optional timestamp."""

    @property
    def metric(self) -> str:
        """The metric name itself (without quotes)."""
        return _unquote(self.name)

    def with_label(self, name: str, value: str) -> Sample:
        """This sample with ``name="value"`` as its first label.

        A label of that name already there is kept as ``exported_<name>``, as Prometheus does when a
        target's label meets one of its own (vLLM labels its samples ``engine="0"``).
        """
        taken = {_unquote(label) for label, _ in self.labels}
        renamed: list[tuple[str, str]] = []
        for label, text in self.labels:
            if _unquote(label) == name:
                exported = f"exported_{name}"
                while exported in taken:
                    exported = f"exported_{exported}"
                taken.add(exported)
                label = exported
            renamed.append((label, text))
        return Sample(self.name, ((name, f'"{escape_label_value(value)}"'), *renamed), self.value)

    def render(self) -> str:
        """The sample line in the text format."""
        pairs = [f"{label}={text}" for label, text in self.labels]
        if self.name.startswith('"'):
            return "{" + ",".join([self.name, *pairs]) + "} " + self.value
        if pairs:
            return f"{self.name}{{{','.join(pairs)}}} {self.value}"
        return f"{self.name} {self.value}"


def parse_sample(line: str) -> Sample:
    """One sample line (``name value``, ``name{a="b",} value timestamp``, ``{"name",a="b"} value``).

    Raises :class:`ExpositionError` for a line that is not one: no name, an unterminated or unquoted
    label value, a missing ``=`` or ``}``, no value.
    """
    scanner = _Scanner(line.strip())
    name = scanner.bare_name()
    if not name and scanner.peek() != "{":
        raise scanner.fail("expected a metric name")
    scanner.skip_spaces()
    labels: list[tuple[str, str]] = []
    if scanner.peek() == "{":
        scanner.take("{")
        while True:
            scanner.skip_spaces()
            if scanner.peek() == "}":
                break
            token = scanner.quoted() if scanner.peek() == '"' else scanner.bare_name()
            if not token:
                raise scanner.fail("expected a label name")
            scanner.skip_spaces()
            if not name and not labels and token.startswith('"') and scanner.peek() in (",", "}"):
                name = token  # text format 1.0.0: the metric's quoted name comes first inside the braces
            else:
                scanner.take("=")
                scanner.skip_spaces()
                if scanner.peek() != '"':
                    raise scanner.fail("expected a quoted label value")
                labels.append((token, scanner.quoted()))
                scanner.skip_spaces()
            if scanner.peek() != ",":
                break
            scanner.take(",")
        scanner.take("}")
        if not name:
            raise scanner.fail("expected a metric name")
    elif scanner.peek() and scanner.pos == len(name):
        raise scanner.fail("expected a space after the metric name")
    value = scanner.line[scanner.pos :].strip()
    if not value:
        raise scanner.fail("expected a value")
    if not _is_value_and_timestamp(value.split()):
        raise scanner.fail("expected a number and an optional timestamp")
    return Sample(name, tuple(labels), value)


def _is_value_and_timestamp(words: list[str]) -> bool:
    """Whether a sample's last words are a value (a float, ``NaN``, ``+Inf``) and at most a timestamp."""
    if not 1 <= len(words) <= 2 or any("_" in word for word in words):
        return False
    try:
        for word in words:
            float(word)
    except ValueError:
        return False
    return True


@dataclass(slots=True)
class _Family:
    """One metric family: its header lines' name as written, its help and type, its samples' lines."""

    written_name: str
    help: str | None = None
    type: str | None = None
    lines: list[str] = field(default_factory=list)


class MetricFamilies:
    """Expositions merged family by family, in the order each family first appeared.

    Add each process's page with :meth:`add_exposition`; :meth:`render` writes every family once:
    ``# HELP``, ``# TYPE`` (the first ones seen), then the samples of every page in the order added.
    """

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def add_exposition(self, text: str, label: tuple[str, str] | None = None) -> list[str]:
        """Merge one ``/metrics`` page, every sample labelled ``label`` (name, value) if given.

        Returns what was wrong with the lines that were left out (empty when all were read): one
        bad line costs that line, not the page.
        """
        problems: list[str] = []
        current: str | None = None  # the family the last # HELP or # TYPE named
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("#"):
                    current = self._header(line) or current
                    continue
                sample = parse_sample(line)
            except ExpositionError as exc:
                problems.append(str(exc))
                continue
            if label is not None:
                sample = sample.with_label(*label)
            self._family_of(sample.metric, current).lines.append(sample.render())
        return problems

    def render(self) -> str:
        """The merged exposition (an empty string when nothing was added)."""
        out: list[str] = []
        for family in self._families.values():
            if family.help is not None:
                out.append(f"# HELP {family.written_name} {family.help}".rstrip(" "))
            if family.type is not None:
                out.append(f"# TYPE {family.written_name} {family.type}")
            out.extend(family.lines)
        return "".join(f"{line}\n" for line in out)

    def _header(self, line: str) -> str | None:
        """Record a ``# HELP`` or ``# TYPE`` line; the family it names (None for any other comment)."""
        scanner = _Scanner(line)
        scanner.take("#")
        scanner.skip_spaces()
        keyword = scanner.bare_name()
        if keyword not in ("HELP", "TYPE"):
            return None  # other comments, OpenMetrics' # UNIT and # EOF
        scanner.skip_spaces()
        written = scanner.quoted() if scanner.peek() == '"' else scanner.bare_name()
        if not written:
            raise scanner.fail(f"expected a metric name after # {keyword}")
        rest = scanner.line[scanner.pos :].strip()
        name = _unquote(written)
        family = self._families.setdefault(name, _Family(written))
        if keyword == "HELP" and family.help is None:
            family.help = rest
        elif keyword == "TYPE" and family.type is None:
            if not rest:
                raise scanner.fail("expected a type after # TYPE and the name")
            family.type = rest
        return name

    def _family_of(self, metric: str, current: str | None) -> _Family:
        """The family a sample belongs to: the current one if the name fits it, else a known or new one."""
        for family_name in (current, metric):
            if family_name is not None and _belongs(metric, family_name) and family_name in self._families:
                return self._families[family_name]
        for suffix in SAMPLE_SUFFIXES:
            base = metric.removesuffix(suffix)
            if base != metric and base in self._families:
                return self._families[base]
        return self._families.setdefault(
            metric, _Family(metric if _is_bare(metric) else f'"{escape_label_value(metric)}"')
        )


def _belongs(metric: str, family: str) -> bool:
    """Whether a sample named ``metric`` is one of ``family``'s (its name, or its name and a suffix)."""
    return metric == family or (metric.startswith(family) and metric[len(family) :] in SAMPLE_SUFFIXES)


def _is_bare(name: str) -> bool:
    """Whether ``name`` can be written without quotes."""
    return bool(name) and name[0] in _NAME_START and all(char in _NAME_CHARS for char in name)
