"""The shared sentence splitter: never cuts an abbreviation or a CJK word, always gives the text back."""

from __future__ import annotations

import pytest

from contract.sentences import cut_prose, cut_sentence, split_paragraphs, split_sentences
from orchestrator.segmenting import split_document

SENTENCE_CASES = [
    ("Dr. Smith went home. He slept well.", ["Dr. Smith went home.", "He slept well."]),
    ("Mr. and Mrs. Brown came. They left.", ["Mr. and Mrs. Brown came.", "They left."]),
    ("Use a tool, e.g. Paris or Rome. Then go.", ["Use a tool, e.g. Paris or Rome.", "Then go."]),
    ("One thing, i.e. This one, counts. Next.", ["One thing, i.e. This one, counts.", "Next."]),
    ("Some fruit (e.g. Apples) is good. Yes.", ["Some fruit (e.g. Apples) is good.", "Yes."]),
    ("J. R. R. Tolkien wrote it. Read it.", ["J. R. R. Tolkien wrote it.", "Read it."]),
    ("It cost approx. ten dollars. Cheap.", ["It cost approx. ten dollars.", "Cheap."]),
    ("Born in the U.S. Army base. Later.", ["Born in the U.S. Army base.", "Later."]),
    ("Prof. Li vs. Dr. Wu. A draw.", ["Prof. Li vs. Dr. Wu.", "A draw."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ("Really? Yes! Fine.", ["Really?", "Yes!", "Fine."]),
    ("The answer is no. We left.", ["The answer is no.", "We left."]),
    ("Version 2.5 is out. Get it.", ["Version 2.5 is out.", "Get it."]),
    (
        "今日はいい天気です。駅はどこですか？コーヒーを一杯お願いします。",
        ["今日はいい天気です。", "駅はどこですか？", "コーヒーを一杯お願いします。"],
    ),
    ("今天天气很好。火车站在哪里？请给我一杯咖啡！", ["今天天气很好。", "火车站在哪里？", "请给我一杯咖啡！"]),
    ("「行こう。」と彼は言った。そして出た。", ["「行こう。」", "と彼は言った。", "そして出た。"]),
    ("오늘은 날씨가 좋네요. 커피 주세요.", ["오늘은 날씨가 좋네요.", "커피 주세요."]),
    ("English first. 日本語です。Back to English.", ["English first.", "日本語です。", "Back to English."]),
    ("No boundary here", ["No boundary here"]),
]


@pytest.mark.parametrize(("text", "sentences"), SENTENCE_CASES)
def test_sentences_never_end_at_an_abbreviation_and_cjk_ends_without_spaces(text: str, sentences: list[str]) -> None:
    spans = split_sentences(text)
    assert "".join(spans) == text
    assert [p for p in spans if not p.isspace()] == sentences


CJK_WORDS = ["必要", "天気", "コーヒー", "お願い", "文章", "途中"]


@pytest.mark.parametrize("limit", [5, 8, 13, 20, 33])
def test_a_long_japanese_sentence_is_never_cut_inside_a_word(limit: int) -> None:
    text = (
        "日本語の文章はとても長いので天気の話をしてコーヒーをお願いする必要があります、しかし単語の途中では切りません"
    )
    parts = cut_sentence(text, limit)
    assert "".join(parts) == text
    assert all(len(p) <= limit for p in parts)
    cuts = {sum(len(p) for p in parts[:n]) for n in range(1, len(parts))}
    for word in CJK_WORDS:
        start = text.index(word)
        assert not any(start < cut < start + len(word) for cut in cuts), (word, parts)


def test_long_latin_sentences_are_cut_at_spaces_and_prose_gives_the_text_back() -> None:
    sentence = "word " * 60 + "end."
    parts = cut_sentence(sentence, 50)
    assert "".join(parts) == sentence
    assert all(len(p) <= 50 for p in parts)
    assert all(p.strip() in ("", *sentence.split()) or " " in p or p.isspace() for p in parts)
    assert all(not p.startswith("ord") for p in parts)  # no word split
    text = "Dr. Who arrived. " * 30 + "上手です。" * 30
    spans = cut_prose(text, 60)
    assert "".join(spans) == text
    assert all(len(p) <= 60 for p in spans)
    assert not any(p.endswith("Dr.") for p in spans)


def test_paragraphs_keep_their_breaks() -> None:
    text = "One.\n\nTwo.\n  \n  Three\nstill three."
    assert split_paragraphs(text) == ["One.", "\n\n", "Two.", "\n  \n  ", "Three\nstill three."]
    assert split_paragraphs(text, lines=True) == ["One.", "\n\n", "Two.", "\n  \n  ", "Three", "\n", "still three."]


def test_documents_use_the_same_splitter() -> None:
    text = "Dr. Smith is here, e.g. Paris. " * 20 + "\n"
    skeleton = split_document(text, "txt", 40)
    assert skeleton.source() == text
    assert not any(s.text.endswith(("Dr.", "e.g.")) for s in skeleton.segments)
    cjk = "今日はいい天気です。" * 20
    segments = split_document(cjk, "txt", 30).segments
    assert [s.text for s in segments] == ["今日はいい天気です。今日はいい天気です。今日はいい天気です。"] * 6 + [
        "今日はいい天気です。今日はいい天気です。"
    ]
