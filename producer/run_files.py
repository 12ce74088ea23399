"""Bulk runs: a JSONL file of translations submitted as one run, followed by id, collected in order.

Modelled on the OpenAI Batch API: each input line is ``{"custom_id": ..., "text": ...}`` with
optional ``source_lang``, ``target_lang`` and ``metadata``; the run has an id, counts per status
and an estimate of the time left; the results come back one line per input line, in input order.

The file is read twice, streaming (bounded memory for any size): first every line is validated
(nothing is submitted if one is bad), then the jobs are submitted in chunks. Job ids are derived
from the run id and the line number, so a run's jobs can be cancelled without storing their ids.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec

from contract.errors import InvalidJobError
from contract.ids import job_id_for
from contract.schemas import JobSpec, build_job_spec

MAX_CUSTOM_ID_CHARS = 256
MAX_REPORTED_ERRORS = 20


class InvalidRunFileError(InvalidJobError):
    """A run's input file has bad lines; the message lists them (by line number) and nothing was submitted."""


def read_run_file(
    path: Path, source_lang: str | None, target_lang: str | None, max_chars: int, group_id: str
) -> Iterator[JobSpec]:
    """The run's jobs, one per non-empty line, validated; raises :class:`InvalidRunFileError` on a bad line."""
    for number, line in _lines(path):
        yield _line_spec(number, line, source_lang, target_lang, max_chars, group_id)


def validate_run_file(path: Path, source_lang: str | None, target_lang: str | None, max_chars: int) -> int:
    """Check every line (streaming, nothing kept but digests of the custom ids); return the number of jobs.

    Raises :class:`InvalidRunFileError` listing up to ``MAX_REPORTED_ERRORS`` bad lines.
    """
    errors: list[str] = []
    seen: dict[bytes, int] = {}
    count = 0
    placeholder = str(uuid.UUID(int=0))
    for number, line in _lines(path):
        try:
            spec = _line_spec(number, line, source_lang, target_lang, max_chars, placeholder, sequence=count)
        except InvalidRunFileError as exc:
            errors.append(str(exc))
        else:
            digest = hashlib.blake2b(spec.metadata["custom_id"].encode(), digest_size=16).digest()
            if digest in seen:
                errors.append(
                    f"line {number}: custom_id {spec.metadata['custom_id']!r} already used on line {seen[digest]}"
                )
            seen[digest] = number
        count += 1
        if len(errors) >= MAX_REPORTED_ERRORS:
            errors.append("... (stopped after the first errors)")
            break
    if errors:
        raise InvalidRunFileError(f"{path}: nothing was submitted; fix these lines:\n  " + "\n  ".join(errors))
    if count == 0:
        raise InvalidRunFileError(f"{path}: the file has no lines to translate")
    return count


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


def _line_spec(
    number: int,
    line: str,
    source_lang: str | None,
    target_lang: str | None,
    max_chars: int,
    group_id: str,
    sequence: int | None = None,
) -> JobSpec:
    """One line as a job of the run (``sequence`` defaults to nothing: the caller counts)."""
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidRunFileError(f"line {number}: not JSON ({exc.msg})") from None
    if not isinstance(item, dict):
        raise InvalidRunFileError(f"line {number}: must be a JSON object with custom_id and text")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip() or len(custom_id) > MAX_CUSTOM_ID_CHARS:
        raise InvalidRunFileError(
            f"line {number}: custom_id must be a non-empty string of at most {MAX_CUSTOM_ID_CHARS} characters"
        )
    unknown = set(item) - {"custom_id", "text", "source_lang", "target_lang", "metadata"}
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
        )
    except InvalidJobError as exc:
        raise InvalidRunFileError(f"line {number} ({custom_id}): {exc}") from None
    return msgspec.structs.replace(spec, run_id=group_id, sequence=sequence)


def number_jobs(specs: Iterator[JobSpec], group_id: str) -> Iterator[JobSpec]:
    """Give each job its sequence number and the id derived from it."""
    for sequence, spec in enumerate(specs):
        yield msgspec.structs.replace(spec, job_id=job_id_for(group_id, sequence), sequence=sequence)
