"""Every input ``dragoman eval`` reads, turned into segments with both languages known, then selected.

The reader is chosen by the file's suffix (``.po``, ``.xliff``/``.xlf``, ``.tmx``, ``.jsonl``), or
is the aligned pair of ``--source``/``--reference`` text files. ``--from``/``--to`` fill in a
language the file does not say; one that contradicts the file is an error (a JSONL line's own
languages override them instead: the flags are the defaults of its lines) (a PO whose header says
``Language: de`` evaluated ``--to fr`` scores German references against French output). The
selection (``--max-chars``, then ``--limit`` or ``--sample``) applies to each file on its own, so
a few catalogues of different sizes each give the same number of segments.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from contract.errors import UnsupportedLanguageError
from contract.languages import normalize_language
from evaluation.jsonl_reader import read_jsonl
from evaluation.po_reader import read_po
from evaluation.segments import EvaluationInputError, Segment
from evaluation.text_reader import read_aligned
from evaluation.tmx_reader import read_tmx
from evaluation.xliff_reader import read_xliff

_READERS: dict[str, Callable[[Path], list[Segment]]] = {
    ".po": read_po,
    ".xliff": read_xliff,
    ".xlf": read_xliff,
    ".jsonl": read_jsonl,
}


@dataclass(frozen=True, slots=True)
class Selection:
    """Which of a file's segments are evaluated: all, the first ``limit``, or ``sample`` drawn with ``seed``."""

    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    max_chars: int | None = None  # sources longer than this are left out (before limit/sample)

    def apply(self, segments: list[Segment]) -> list[Segment]:
        """The selected segments, in file order."""
        if self.max_chars is not None:
            segments = [segment for segment in segments if len(segment.source) <= self.max_chars]
        if self.sample is not None and self.sample < len(segments):
            chosen = sorted(random.Random(self.seed).sample(range(len(segments)), self.sample))
            segments = [segments[index] for index in chosen]
        if self.limit is not None:
            segments = segments[: self.limit]
        return segments


def load_segments(
    files: Sequence[Path],
    *,
    source_file: Path | None = None,
    reference_file: Path | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    selection: Selection = Selection(),
) -> list[Segment]:
    """Every selected segment of ``files`` (and of the aligned pair), in order, both languages normalised."""
    if (source_file is None) != (reference_file is None):
        raise EvaluationInputError("--source and --reference go together: the texts and their human translations")
    if not files and source_file is None:
        raise EvaluationInputError(
            "nothing to evaluate: give a .po, .xliff, .tmx or .jsonl file, or --source and --reference"
        )
    flags = (_flag(source_lang, "--from"), _flag(target_lang, "--to"))
    loaded: list[Segment] = []
    inputs: list[tuple[Path, Callable[[], list[Segment]]]] = [(path, _reader(path, *flags)) for path in files]
    if source_file is not None and reference_file is not None:
        inputs.append((source_file, lambda: read_aligned(source_file, reference_file)))
    for name, read in inputs:
        per_line = name.suffix.lower() == ".jsonl"  # a line's own languages override the flags' defaults
        segments = [_with_languages(segment, *flags, checked=not per_line) for segment in read()]
        if not segments:
            raise EvaluationInputError(f"{name}: no pair with both a source and a human translation")
        loaded.extend(selection.apply(segments))
    if not loaded:
        raise EvaluationInputError("no segment left to evaluate after --max-chars")
    return loaded


def _reader(path: Path, source_lang: str | None, target_lang: str | None) -> Callable[[], list[Segment]]:
    """The reader for ``path``'s format, by its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".tmx":
        return lambda: read_tmx(path, source_lang, target_lang)
    read = _READERS.get(suffix)
    if read is None:
        raise EvaluationInputError(
            f"{path}: unknown format {suffix or '(no suffix)'}; dragoman eval reads .po, .xliff/.xlf, .tmx and "
            ".jsonl files, and aligned text files given as --source A --reference B"
        )
    return lambda: read(path)


def _with_languages(segment: Segment, source_lang: str | None, target_lang: str | None, *, checked: bool) -> Segment:
    """``segment`` with both languages set and normalised: the file's (``checked`` against the flags), else the
    flags'."""
    source = _language(
        segment,
        segment.source_lang,
        source_lang if checked or segment.source_lang is None else None,
        "--from",
        "source",
    )
    target = _language(
        segment, segment.target_lang, target_lang if checked or segment.target_lang is None else None, "--to", "target"
    )
    return replace(segment, source_lang=source, target_lang=target)


def _language(segment: Segment, said: str | None, flag: str | None, flag_name: str, which: str) -> str:
    if said is None:
        if flag is None:
            raise EvaluationInputError(
                f"{segment.origin}: the file does not say its {which} language; pass {flag_name}"
            )
        return flag
    try:
        code = normalize_language(said)
    except UnsupportedLanguageError as exc:
        raise EvaluationInputError(f"{segment.origin}: {exc}") from None
    if flag is not None and flag != code and flag.split("-")[0] != code.split("-")[0]:
        raise EvaluationInputError(
            f"{segment.origin}: the file's {which} language is {code}, but {flag_name} says {flag}"
        )
    return code


def _flag(code: str | None, name: str) -> str | None:
    if code is None:
        return None
    try:
        return normalize_language(code)
    except UnsupportedLanguageError as exc:
        raise EvaluationInputError(f"{name}: {exc}") from None
