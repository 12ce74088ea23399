"""sacreBLEU's scores: chrF++, BLEU and TER over a corpus (with their signatures), chrF++ per sentence.

chrF++ is ``CHRF(word_order=2)``, sacreBLEU's own; BLEU tokenises with ``zh`` for Chinese and
``char`` for Japanese, Korean and Thai (sacreBLEU's ``ja-mecab``/``ko-mecab`` need MeCab, which is
not a dependency), ``13a`` otherwise; TER normalises CJK punctuation for those languages. The
signature says exactly that, so a score can be compared with another one only when they match.
sacreBLEU is the ``eval`` extra: without it a clear error says what to install.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contract.errors import EngineNotInstalledError

CHRF_PP, BLEU, TER = "chrF++", "BLEU", "TER"
METRICS = (CHRF_PP, BLEU, TER)
"""The corpus metrics, in the order the report prints them. TER is lower-is-better, the others higher."""

_CHARACTER_TOKENS = ("ja", "ko", "th")
_CJK = ("zh", "ja", "ko")


@dataclass(frozen=True, slots=True)
class MetricScore:
    """One corpus metric's score with the sacreBLEU signature that makes it reproducible."""

    name: str
    score: float
    signature: str


def _sacrebleu() -> Any:
    try:
        import sacrebleu
    except ImportError:
        raise EngineNotInstalledError(
            "dragoman eval scores with sacreBLEU, which is not installed: pip install 'dragoman[eval]'"
        ) from None
    return sacrebleu


def corpus_scores(outputs: Sequence[str], references: Sequence[str], target_lang: str) -> list[MetricScore]:
    """chrF++, BLEU and TER of ``outputs`` against one reference each, for text in ``target_lang``."""
    metrics = _sacrebleu().metrics
    language = target_lang.split("-")[0].lower()
    tokenize = "zh" if language == "zh" else "char" if language in _CHARACTER_TOKENS else "13a"
    scorers = (
        (CHRF_PP, metrics.CHRF(word_order=2)),
        (BLEU, metrics.BLEU(tokenize=tokenize)),
        (TER, metrics.TER(asian_support=language in _CJK)),
    )
    refs = [list(references)]
    return [
        MetricScore(name, float(scorer.corpus_score(list(outputs), refs).score), str(scorer.get_signature()))
        for name, scorer in scorers
    ]


class SentenceChrf:
    """chrF++ of single sentences (one scorer, reused): what ranks the worst segments."""

    def __init__(self) -> None:
        self._scorer = _sacrebleu().metrics.CHRF(word_order=2)

    def score(self, output: str, reference: str) -> float:
        """The sentence's chrF++, 0-100."""
        return float(self._scorer.sentence_score(output, [reference]).score)
