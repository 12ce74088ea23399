"""The benchmark workload, after the seed's lesson: realistic variable-length input, fixed seed.

Inputs are 10-200 tokens of text (uniformly spread), each job's output budget follows its input
length; the "uniform" workload gives every job the mean length, which hides head-of-line
blocking and flatters static batching.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

WORDS = (
    "the market report shows that our customers in the northern region ordered more spare parts "
    "this quarter while delivery times improved after the new warehouse opened near the river and "
    "the support team answered most questions within one hour although several invoices still "
    "need to be checked before the end of the month because the accounting system was updated"
).split()


class Encoder(Protocol):
    """The tokenizer methods the workload needs."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


def token_lengths(count: int, kind: str = "realistic", seed: int = 2026) -> list[int]:
    """Input lengths in tokens: uniform over 10-200 ("realistic") or all 105 ("uniform")."""
    if kind == "uniform":
        return [105] * count
    if kind != "realistic":
        raise ValueError(f"unknown workload {kind!r}: realistic or uniform")
    rng = random.Random(seed)
    return [rng.randint(10, 200) for _ in range(count)]


def texts_of_lengths(tokenizer: Encoder, lengths: list[int], seed: int = 2026) -> list[str]:
    """Texts whose token counts are (about) ``lengths``, cut from shuffled word sequences."""
    rng = random.Random(seed)
    texts = []
    for length in lengths:
        words = [rng.choice(WORDS) for _ in range(length * 2 + 8)]
        ids = tokenizer.encode(" ".join(words), add_special_tokens=False)[:length]
        texts.append(tokenizer.decode(ids, skip_special_tokens=True).strip())
    return texts
