"""Two aligned text files: line N of the source file is translated by line N of the reference file.

The files must have the same number of lines (else a clear error with both counts); a pair whose
source or reference line is blank is skipped (there is nothing to translate or to score against).
"""

from __future__ import annotations

from pathlib import Path

from evaluation.segments import EvaluationInputError, Segment
from evaluation.text_files import read_text_file


def read_aligned(source_path: Path, reference_path: Path) -> list[Segment]:
    """The line pairs of ``source_path`` and ``reference_path``, in file order."""
    sources = read_text_file(source_path).splitlines()
    references = read_text_file(reference_path).splitlines()
    if len(sources) != len(references):
        raise EvaluationInputError(
            f"--source {source_path} has {len(sources)} lines and --reference {reference_path} has "
            f"{len(references)}: the files must be aligned line by line"
        )
    return [
        Segment(source, reference, f"{source_path}:{number}")
        for number, (source, reference) in enumerate(zip(sources, references, strict=True), start=1)
        if source.strip() and reference.strip()
    ]
