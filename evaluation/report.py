"""The evaluation's outcome, per model and language pair: sacreBLEU's scores, failures, flags, worst segments.

A failed job (or one cancelled past ``--timeout``) is scored as an empty translation: every model is
scored on the same segments, so a model that fails more scores lower instead of being scored on the
easy rest; the report counts the failures beside the scores, and lists them among the worst
segments with their errors. Quality flags are counted from the jobs' rows as the workers filled
them in (a row without them is counted as unchecked).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluation.runner import Outcome
from evaluation.scoring import METRICS, MetricScore, SentenceChrf, corpus_scores
from evaluation.segments import Segment


@dataclass(frozen=True, slots=True)
class PairReport:
    """One model's scores on one language pair's segments."""

    source_lang: str
    target_lang: str
    segments: int
    failed: int
    scores: tuple[MetricScore, ...]
    flags: Mapping[str, int]  # flag -> segments that carry it
    flagged: int  # segments with at least one flag
    unchecked: int  # succeeded segments whose row has no quality check

    @property
    def pair(self) -> str:
        """``source-target``, as the table shows it."""
        return f"{self.source_lang}->{self.target_lang}"

    def score(self, metric: str) -> MetricScore:
        """The corpus score of ``metric``."""
        return next(score for score in self.scores if score.name == metric)


@dataclass(frozen=True, slots=True)
class ScoredSegment:
    """One segment as one model translated it, with its sentence chrF++."""

    index: int
    segment: Segment
    outcome: Outcome
    chrf: float


@dataclass(frozen=True, slots=True)
class SystemReport:
    """Everything measured of one model."""

    model: str
    pairs: tuple[PairReport, ...]
    scored: tuple[ScoredSegment, ...]  # in input order

    def worst(self, count: int) -> list[ScoredSegment]:
        """The ``count`` segments with the lowest sentence chrF++ (failures first among equals), worst first."""
        return sorted(self.scored, key=lambda item: (item.chrf, item.outcome.succeeded, item.index))[:count]


@dataclass(frozen=True, slots=True)
class Report:
    """The whole evaluation: the segments and each model's report, in the order the models were named."""

    segments: tuple[Segment, ...]
    systems: tuple[SystemReport, ...] = field(default_factory=tuple)


def build_report(segments: Sequence[Segment], outcomes: Mapping[str, Sequence[Outcome]]) -> Report:
    """Score each model's outcomes (same segments, same order) per language pair."""
    sentence = SentenceChrf()
    systems: list[SystemReport] = []
    for model, results in outcomes.items():
        if len(results) != len(segments):
            raise ValueError(f"model {model}: {len(results)} outcomes for {len(segments)} segments")
        scored = [
            ScoredSegment(index, segment, outcome, sentence.score(_output(outcome), segment.reference))
            for index, (segment, outcome) in enumerate(zip(segments, results, strict=True))
        ]
        systems.append(SystemReport(model, tuple(_pairs(scored)), tuple(scored)))
    return Report(tuple(segments), tuple(systems))


def _output(outcome: Outcome) -> str:
    """What is scored for a job: its translation, or the empty string for one that failed."""
    return outcome.translation if outcome.succeeded and outcome.translation is not None else ""


def _pairs(scored: Sequence[ScoredSegment]) -> list[PairReport]:
    """One report per language pair, in the order the pairs first appear."""
    groups: dict[tuple[str, str], list[ScoredSegment]] = {}
    for item in scored:
        key = (item.segment.source_lang or "", item.segment.target_lang or "")
        groups.setdefault(key, []).append(item)
    reports: list[PairReport] = []
    for (source_lang, target_lang), items in groups.items():
        flags: Counter[str] = Counter()
        for item in items:
            flags.update((item.outcome.quality_flags or {}).keys())
        succeeded = [item for item in items if item.outcome.succeeded]
        reports.append(
            PairReport(
                source_lang,
                target_lang,
                segments=len(items),
                failed=len(items) - len(succeeded),
                scores=tuple(
                    corpus_scores(
                        [_output(item.outcome) for item in items],
                        [item.segment.reference for item in items],
                        target_lang,
                    )
                ),
                flags=dict(sorted(flags.items())),
                flagged=sum(1 for item in items if item.outcome.quality_flags),
                unchecked=sum(1 for item in succeeded if item.outcome.quality_flags is None),
            )
        )
    return reports


# -- text ------------------------------------------------------------------------------------------


def format_report(report: Report, worst: int) -> str:
    """The report for a terminal: one table (a column per model), the signatures, flags, worst segments."""
    models = [system.model for system in report.systems]
    lines = [
        f"dragoman eval: {len(report.segments)} segments, model{'s' if len(models) > 1 else ''} {', '.join(models)}",
        "",
    ]
    lines.extend(_table(report))
    lines.append("chrF++ and BLEU: higher is better; TER (an edit rate): lower is better; a failed job scores as empty")
    lines.append("")
    lines.append("signatures (sacreBLEU):")
    for metric in METRICS:
        by_signature: dict[str, list[str]] = {}
        for pair in report.systems[0].pairs:
            by_signature.setdefault(pair.score(metric).signature, []).append(pair.pair)
        for signature, pairs in by_signature.items():
            where = "" if len(by_signature) == 1 else f" ({', '.join(pairs)})"
            lines.append(f"  {metric}{where}: {signature}")
    lines.append("")
    lines.append("quality flags (segments flagged, by flag):")
    for system in report.systems:
        for pair in system.pairs:
            counts = ", ".join(f"{flag} {count}" for flag, count in pair.flags.items()) or "none"
            unchecked = f"; {pair.unchecked} not checked by the worker" if pair.unchecked else ""
            lines.append(
                f"  {system.model} {pair.pair}: {pair.flagged} of {pair.segments} flagged: {counts}{unchecked}"
            )
    for system in report.systems if worst > 0 else ():
        lines.append("")
        lines.append(f"worst {min(worst, len(system.scored))} segments by sentence chrF++ ({system.model}):")
        for rank, item in enumerate(system.worst(worst), start=1):
            lines.extend(_segment_lines(rank, item))
    return "\n".join(lines)


def _table(report: Report) -> list[str]:
    """Rows of pair x metric, a column per model (and the difference, for two)."""
    models = [system.model for system in report.systems]
    width = max(10, *(len(model) for model in models))
    header = f"{'pair':<12} {'metric':<9}" + "".join(f" {model:>{width}}" for model in models)
    if len(models) == 2:
        header += f" {'difference':>{width}}"
    rows = [header]
    for index, first in enumerate(report.systems[0].pairs):
        pairs = [system.pairs[index] for system in report.systems]
        values: list[tuple[str, list[float], str]] = [
            *((metric, [pair.score(metric).score for pair in pairs], ".1f") for metric in METRICS),
            ("failed", [float(pair.failed) for pair in pairs], ".0f"),
            ("flagged", [float(pair.flagged) for pair in pairs], ".0f"),
        ]
        rows.append(f"{first.pair:<12} {'segments':<9}" + "".join(f" {first.segments:>{width}}" for _ in pairs))
        for name, numbers, shape in values:
            row = f"{'':<12} {name:<9}" + "".join(f" {value:>{width}{shape}}" for value in numbers)
            if len(numbers) == 2:
                row += f" {numbers[1] - numbers[0]:>+{width}{shape}}"
            rows.append(row)
    return rows


def _segment_lines(rank: int, item: ScoredSegment) -> list[str]:
    outcome = item.outcome
    output = outcome.translation if outcome.succeeded else f"({outcome.status}: {outcome.error or 'no error recorded'})"
    flags = "; ".join(f"{flag}: {evidence}" for flag, evidence in (outcome.quality_flags or {}).items())
    segment = item.segment
    lines = [
        f"{rank:>3}. chrF++ {item.chrf:5.1f}  {segment.origin}  ({segment.source_lang}->{segment.target_lang})",
        f"     source:    {_one_line(item.segment.source)}",
        f"     reference: {_one_line(item.segment.reference)}",
        f"     output:    {_one_line(output or '')}",
    ]
    if flags:
        lines.append(f"     flags:     {_one_line(flags)}")
    return lines


def _one_line(text: str, limit: int = 200) -> str:
    flat = text.replace("\r", "\\r").replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- JSON ------------------------------------------------------------------------------------------


def report_json(report: Report, worst: int) -> dict[str, Any]:
    """The report for machines: per model and pair the scores with signatures, flags and worst segments,
    and every segment with each model's outcome."""
    return {
        "segments": len(report.segments),
        "models": [system.model for system in report.systems],
        "systems": [
            {
                "model": system.model,
                "pairs": [
                    {
                        "source_lang": pair.source_lang,
                        "target_lang": pair.target_lang,
                        "segments": pair.segments,
                        "failed": pair.failed,
                        "scores": {s.name: {"score": round(s.score, 4), "signature": s.signature} for s in pair.scores},
                        "flags": dict(pair.flags),
                        "flagged": pair.flagged,
                        "unchecked": pair.unchecked,
                    }
                    for pair in system.pairs
                ],
                "worst": [item.index for item in system.worst(worst)],
            }
            for system in report.systems
        ],
        "results": [
            {
                "origin": segment.origin,
                "source_lang": segment.source_lang,
                "target_lang": segment.target_lang,
                "source": segment.source,
                "reference": segment.reference,
                "outputs": {
                    system.model: {
                        "job_id": system.scored[index].outcome.job_id,
                        "status": system.scored[index].outcome.status,
                        "translation": system.scored[index].outcome.translation,
                        "error": system.scored[index].outcome.error,
                        "quality_flags": system.scored[index].outcome.quality_flags,
                        "chrf++": round(system.scored[index].chrf, 4),
                    }
                    for system in report.systems
                },
            }
            for index, segment in enumerate(report.segments)
        ],
    }
