"""A JSONL file of pairs: one ``{"source": ..., "reference": ...}`` object a line.

Optional ``source_lang``/``target_lang`` on a line give its languages (a file may hold several
pairs: the report scores each target language on its own). Blank lines are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.segments import EvaluationInputError, Segment
from evaluation.text_files import read_text_file


def read_jsonl(path: Path) -> list[Segment]:
    """The pairs of the JSONL file at ``path``, in file order."""
    segments: list[Segment] = []
    for number, line in enumerate(read_text_file(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise EvaluationInputError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(item, dict):
            raise EvaluationInputError(f'{path}:{number}: expected an object {{"source": ..., "reference": ...}}')
        source, reference = item.get("source"), item.get("reference")
        if not isinstance(source, str) or not isinstance(reference, str):
            raise EvaluationInputError(f"{path}:{number}: 'source' and 'reference' must be strings")
        if not source.strip() or not reference.strip():
            raise EvaluationInputError(f"{path}:{number}: an empty source or reference")
        languages = [item.get("source_lang"), item.get("target_lang")]
        if not all(code is None or isinstance(code, str) for code in languages):
            raise EvaluationInputError(f"{path}:{number}: 'source_lang' and 'target_lang' must be strings or absent")
        segments.append(Segment(source, reference, f"{path}:{number}", *languages))
    return segments
