"""Bulk runs: a JSONL file of translations submitted as one run, followed by id, collected in order.

Modelled on the OpenAI Batch API: each input line is ``{"custom_id": ..., "text": ...}`` with
optional ``source_lang``, ``target_lang`` and ``metadata``; the run has an id, counts per status
and an estimate of the time left; the results come back one line per input line, in input order.

The file is read twice, streaming (bounded memory for any size, duplicate ids included): first
every line is validated (nothing is submitted if one is bad), then the jobs are submitted in
chunks, with a checkpoint after each, so a submission that stopped half-way can be resumed. Job ids are derived
from the run id and the line number, so a run's jobs can be cancelled without storing their ids.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec

from contract.errors import InvalidJobError
from contract.ids import job_id_for
from contract.json_shape import JsonShapeError, check_json_shape
from contract.schemas import JobSpec, build_job_spec
from producer.duplicates import DuplicateFinder, WantedCustomIds

MAX_CUSTOM_ID_CHARS = 256
MAX_REPORTED_ERRORS = 20


class InvalidRunFileError(InvalidJobError):
    """A run's input file has bad lines; the message lists them (by line number) and nothing was submitted."""


def read_run_file(
    path: Path,
    source_lang: str | None,
    target_lang: str | None,
    max_chars: int,
    group_id: str,
    *,
    start: int = 0,
    model: str | None = None,
) -> Iterator[JobSpec]:
    """The run's jobs, one per non-empty line, validated; raises :class:`InvalidRunFileError` on a bad line.

    ``start``: skip the first jobs (a resumed submission), without parsing their lines. ``model``:
    the model of lines that name none (None: the deployment's routes choose).
    """
    for index, (number, line) in enumerate(_lines(path)):
        if index >= start:
            yield parse_run_line(number, line, source_lang, target_lang, max_chars, group_id, model=model)


def validate_run_file(
    path: Path, source_lang: str | None, target_lang: str | None, max_chars: int, model: str | None = None
) -> tuple[int, set[str]]:
    """Check every line (streaming, in bounded memory: see :mod:`producer.duplicates`); return the number of
    jobs and the models the lines name (the caller checks those are served before submitting anything).

    Raises :class:`InvalidRunFileError` listing up to ``MAX_REPORTED_ERRORS`` bad lines.
    """
    errors: list[tuple[int, str]] = []
    count = 0
    models: set[str] = set()
    placeholder = str(uuid.UUID(int=0))
    with DuplicateFinder() as ids:
        for number, line in _lines(path):
            try:
                spec = parse_run_line(
                    number, line, source_lang, target_lang, max_chars, placeholder, sequence=count, model=model
                )
            except InvalidRunFileError as exc:
                errors.append((number, str(exc)))
            else:
                ids.add(spec.metadata["custom_id"], number)
                if spec.model is not None:
                    models.add(spec.model)
            count += 1
            if len(errors) >= MAX_REPORTED_ERRORS:
                break
        if len(errors) < MAX_REPORTED_ERRORS:
            repeated = ids.duplicates(MAX_REPORTED_ERRORS - len(errors))
            errors += repeated_id_errors(repeated, _custom_ids(path, {first for _, first in repeated}))
    check_run_errors(errors, count, f"{path}: ")
    return count, models


def check_run_errors(errors: list[tuple[int, str]], count: int, prefix: str = "") -> None:
    """Raise :class:`InvalidRunFileError` listing ``(line, message)`` errors in line order, or for no lines."""
    if errors:
        listed = [message for _, message in sorted(errors)]
        if len(errors) >= MAX_REPORTED_ERRORS:
            listed.append("... (stopped after the first errors)")
        raise InvalidRunFileError(f"{prefix}nothing was submitted; fix these lines:\n  " + "\n  ".join(listed))
    if count == 0:
        raise InvalidRunFileError(f"{prefix}the run has no lines to translate")


def repeated_id_errors(repeated: list[tuple[int, int]], names: dict[int, str]) -> list[tuple[int, str]]:
    """The error of each ``(line, first line)`` that repeats an earlier line's ``custom_id``."""
    return [
        (line, f"line {line}: custom_id {names.get(first)!r} already used on line {first}") for line, first in repeated
    ]


def _custom_ids(path: Path, line_numbers: set[int]) -> dict[int, str]:
    """The ``custom_id`` of each of a few (valid) lines, read again for an error message."""
    picker = WantedCustomIds(line_numbers)
    if picker.any_wanted:
        for number, line in _lines(path):
            if picker.offer(number, line):
                break
    return picker.found


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
    except FileNotFoundError:
        raise InvalidRunFileError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise InvalidRunFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def parse_run_line(
    number: int,
    line: str,
    source_lang: str | None,
    target_lang: str | None,
    max_chars: int,
    group_id: str,
    sequence: int | None = None,
    model: str | None = None,
) -> JobSpec:
    """One line as a job of the run (``sequence`` defaults to nothing: the caller counts).

    A line's ``model`` names its served model; ``model`` is that of lines naming none (None: the routes').
    """
    try:
        check_json_shape(line, max_values=None)  # before the parser recurses: a line of 100,000 [ is a RecursionError
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidRunFileError(f"line {number}: not JSON ({exc.msg})") from None
    except JsonShapeError as exc:
        raise InvalidRunFileError(f"line {number}: {exc}") from None
    if not isinstance(item, dict):
        raise InvalidRunFileError(f"line {number}: must be a JSON object with custom_id and text")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip() or len(custom_id) > MAX_CUSTOM_ID_CHARS:
        raise InvalidRunFileError(
            f"line {number}: custom_id must be a non-empty string of at most {MAX_CUSTOM_ID_CHARS} characters"
        )
    unknown = set(item) - {"custom_id", "text", "source_lang", "target_lang", "metadata", "model"}
    if unknown:
        raise InvalidRunFileError(f"line {number}: unknown field(s) {', '.join(sorted(unknown))}")
    source = item.get("source_lang", source_lang)
    target = item.get("target_lang", target_lang)
    if not source or not target:
        raise InvalidRunFileError(
            f"line {number}: no source_lang/target_lang on the line and none given for the run (--from/--to)"
        )
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidRunFileError(f"line {number}: metadata must be a JSON object")
    try:
        spec = build_job_spec(
            str(uuid.UUID(int=0)),
            item.get("text"),
            str(source),
            str(target),
            max_chars=max_chars,
            metadata={**metadata, "custom_id": custom_id},
            model=item.get("model", model),
        )
    except InvalidJobError as exc:
        raise InvalidRunFileError(f"line {number} ({shown_custom_id(custom_id)}): {exc}") from None
    return msgspec.structs.replace(spec, run_id=group_id, sequence=sequence)


def shown_custom_id(custom_id: str) -> str:
    """``custom_id`` as an error message can hold it: a lone surrogate (no UTF-8 form) as its ``\\uXXXX`` escape."""
    return custom_id.encode("utf-8", "backslashreplace").decode("utf-8")


def number_jobs(specs: Iterator[JobSpec], group_id: str, *, start: int = 0) -> Iterator[JobSpec]:
    """Give each job its sequence number (counting from ``start``) and the id derived from it."""
    for sequence, spec in enumerate(specs, start=start):
        yield msgspec.structs.replace(spec, job_id=job_id_for(group_id, sequence), sequence=sequence)
