"""Sentences of realistic, varied length for end-to-end tests (the seed's lesson: 10-200 tokens)."""

from __future__ import annotations

import random

SENTENCES = [
    "The train to the airport leaves every twenty minutes.",
    "Please send me the report before the meeting on Friday.",
    "Our team has finished the first version of the new website.",
    "It rained all morning, so we stayed inside and read.",
    "The museum is closed on Mondays but open late on Thursdays.",
    "She bought fresh bread, cheese and apples at the market.",
    "If you have any questions, do not hesitate to contact us.",
    "The hotel room was small, but the view of the sea was wonderful.",
    "We are looking for an engineer with experience in distributed systems.",
    "The children walked to school together through the park.",
]


def varied_texts(count: int, seed: int = 7, min_words: int = 8, max_words: int = 150) -> list[str]:
    """``count`` texts of roughly ``min_words``..``max_words`` words (about 10-200 tokens)."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        target = min_words + (max_words - min_words) * i // max(1, count - 1)
        words: list[str] = []
        while len(words) < target:
            words.extend(rng.choice(SENTENCES).split())
        texts.append(" ".join(words[:target]).rstrip(",") + ("" if words[target - 1].endswith(".") else "."))
    rng.shuffle(texts)
    return texts
