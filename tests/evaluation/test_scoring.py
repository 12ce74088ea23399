"""The scores are sacreBLEU's own, with its signatures; failures score as empty and are counted."""

from __future__ import annotations

import sacrebleu

from evaluation.report import build_report, format_report, report_json
from evaluation.runner import Outcome
from evaluation.scoring import SentenceChrf, corpus_scores
from evaluation.segments import Segment

OUTPUTS = ["Le chat dort sur le tapis.", "Il pleut beaucoup aujourd'hui.", "Bonjour tout le monde"]
REFERENCES = ["Le chat dort sur le tapis.", "Il pleut fort aujourd'hui.", "Bonjour à tous."]


def test_corpus_scores_match_sacrebleu() -> None:
    scores = {score.name: score for score in corpus_scores(OUTPUTS, REFERENCES, "fr")}
    chrf = sacrebleu.metrics.CHRF(word_order=2)
    bleu = sacrebleu.metrics.BLEU()
    ter = sacrebleu.metrics.TER()
    assert scores["chrF++"].score == chrf.corpus_score(OUTPUTS, [REFERENCES]).score
    assert scores["BLEU"].score == bleu.corpus_score(OUTPUTS, [REFERENCES]).score
    assert scores["TER"].score == ter.corpus_score(OUTPUTS, [REFERENCES]).score
    assert scores["chrF++"].signature == str(chrf.get_signature()) and "nw:2" in scores["chrF++"].signature
    assert "tok:13a" in scores["BLEU"].signature and scores["TER"].signature == str(ter.get_signature())
    assert 0 < scores["BLEU"].score < 100 and 0 < scores["chrF++"].score < 100


def test_chinese_and_japanese_bleu_tokenizers() -> None:
    assert "tok:zh" in corpus_scores(["猫在睡觉。"], ["猫在睡觉。"], "zh-Hans")[1].signature
    japanese = corpus_scores(["猫が寝ている。"], ["猫が寝ています。"], "ja")
    assert "tok:char" in japanese[1].signature and "asian:yes" in japanese[2].signature


def test_sentence_chrf_is_sacrebleus() -> None:
    expected = sacrebleu.metrics.CHRF(word_order=2).sentence_score(OUTPUTS[1], [REFERENCES[1]]).score
    assert SentenceChrf().score(OUTPUTS[1], REFERENCES[1]) == expected


def _segments() -> list[Segment]:
    return [Segment(f"source {i}", reference, f"f.jsonl:{i + 1}", "en", "fr") for i, reference in enumerate(REFERENCES)]


def test_report_scores_a_failure_as_empty_and_counts_flags() -> None:
    ok = [Outcome(f"id{i}", "succeeded", text, None, {}) for i, text in enumerate(OUTPUTS)]
    flagged = {"wrong_language": "the output is English, not French"}
    worse = [
        ok[0],
        Outcome("x", "failed", None, "translation cut off", None),
        Outcome("y", "succeeded", "Hello", None, flagged),
    ]
    report = build_report(_segments(), {"a": ok, "b": worse})
    first, second = (system.pairs[0] for system in report.systems)
    assert first.score("chrF++").score == corpus_scores(OUTPUTS, REFERENCES, "fr")[0].score
    expected = corpus_scores([OUTPUTS[0], "", "Hello"], REFERENCES, "fr")
    assert [second.score(metric).score for metric in ("chrF++", "BLEU", "TER")] == [s.score for s in expected]
    assert (second.failed, second.flagged, dict(second.flags), second.unchecked) == (1, 1, {"wrong_language": 1}, 0)
    worst = report.systems[1].worst(2)
    assert [item.index for item in worst] == [1, 2] and worst[0].chrf == 0.0
    text = format_report(report, 2)
    assert "difference" in text and "(failed: translation cut off)" in text
    assert "wrong_language: the output is English, not French" in text
    assert "nrefs:1|case:mixed|eff:yes|nc:6|nw:2" in text
    data = report_json(report, 2)
    assert data["models"] == ["a", "b"] and data["systems"][1]["worst"] == [1, 2]
    assert data["systems"][1]["pairs"][0]["failed"] == 1
    assert data["results"][1]["outputs"]["b"]["status"] == "failed"


def test_report_per_target_language() -> None:
    segments = [*_segments(), Segment("Hello.", "Hallo.", "f.jsonl:4", "en", "de")]
    outcomes = [Outcome(f"id{i}", "succeeded", text, None, None) for i, text in enumerate([*OUTPUTS, "Hallo."])]
    pairs = build_report(segments, {"m": outcomes}).systems[0].pairs
    assert [(pair.pair, pair.segments, pair.unchecked) for pair in pairs] == [("en->fr", 3, 3), ("en->de", 1, 1)]
    assert pairs[1].score("chrF++").score == 100.0
