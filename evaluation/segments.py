"""What every reader yields: a source with its human reference, its languages when the file says them."""

from __future__ import annotations

from dataclasses import dataclass

from contract.errors import DragomanError, InvalidJobError


class EvaluationInputError(InvalidJobError):
    """A file given to ``dragoman eval`` cannot be read as pairs; the message names the file and line."""


class NoLiveWorkerError(DragomanError):
    """A model the evaluation needs has no live worker: its jobs would wait forever, so nothing is submitted."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One source text and its human translation, with where it came from (``file:line`` or ``file unit id``)."""

    source: str
    reference: str
    origin: str
    source_lang: str | None = None  # None: the file does not say (``--from`` fills it in)
    target_lang: str | None = None  # None: the file does not say (``--to`` fills it in)
