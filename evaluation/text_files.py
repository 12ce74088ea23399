"""Reading a user's text file, with an error that names it."""

from __future__ import annotations

from pathlib import Path

from evaluation.segments import EvaluationInputError


def read_text_file(path: Path) -> str:
    """The file's text as UTF-8 (a clear error for an unreadable or undecodable file)."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise EvaluationInputError(f"{path}: cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise EvaluationInputError(f"{path}: not UTF-8 text (byte {exc.start}); convert it with iconv") from None
