"""A document's report: per segment, what became of its placeholder tags, which were flagged and why,
and how many failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.segmenting.skeleton import Segment

_EXCERPT = 120


@dataclass(slots=True)
class DocumentReport:
    """Counts for the whole document and the segments a reader should look at.

    ``with_tags``: segments sent with placeholder tags; ``tags_kept``: those whose translation kept
    them the first time; ``retried``: kept on the one retry; ``fell_back``: each text run between the
    tags translated on its own (the markup is intact, the sentence was not translated whole); ``tags_broken``:
    a stored translation whose tags did not match at assembly (kept in the source language);
    ``flagged``: translated segments whose quality checks found something, each with its flags and their
    evidence (``contract.quality``) and a source excerpt; ``flags``: how many segments had each flag.
    """

    segments: int
    with_tags: int = 0
    tags_kept: int = 0
    retried: list[int] = field(default_factory=list)
    fell_back: list[dict[str, Any]] = field(default_factory=list)
    tags_broken: list[dict[str, Any]] = field(default_factory=list)
    failed: int = 0
    flagged: list[dict[str, Any]] = field(default_factory=list)
    flags: dict[str, int] = field(default_factory=dict)

    def add_flags(self, sequence: int, segment: Segment, quality_flags: dict[str, str] | None) -> None:
        """Note a translated segment's quality flags, if its checks found anything."""
        if not quality_flags:
            return
        self.flagged.append({"segment": sequence, "flags": dict(quality_flags), "source": segment.text[:_EXCERPT]})
        for flag in quality_flags:
            self.flags[flag] = self.flags.get(flag, 0) + 1

    def add(self, sequence: int, segment: Segment, translation: str | None, outcome: str | None) -> None:
        """Count one translated segment."""
        if not segment.codes:
            return
        self.with_tags += 1
        excerpt = {"segment": sequence, "source": segment.text[:_EXCERPT]}  # with its tags: where the markup was
        if translation is not None and not segment.tags_kept(translation):
            self.tags_broken.append(excerpt)
        elif outcome == "fallback":
            self.fell_back.append(excerpt)
        elif outcome == "retried":
            self.retried.append(sequence)
        else:
            self.tags_kept += 1

    def to_dict(self) -> dict[str, Any]:
        """The JSON stored with the document and returned with its result."""
        return {
            "segments": self.segments,
            "with_tags": self.with_tags,
            "tags_kept": self.tags_kept,
            "retried": self.retried,
            "fell_back": self.fell_back,
            "tags_broken": self.tags_broken,
            "failed": self.failed,
            "flagged": self.flagged,
            "flags": self.flags,
        }
