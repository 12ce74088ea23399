"""Which of a glossary's source terms occur in a text, ignoring case: thousands of terms for one pass over the text.

A stored glossary holds up to ten thousand terms, and a DeepL request up to a thousand texts: asking
``term in text`` for every pair is ten million searches, each as long as its text. :class:`TermFinder`
reads the terms once (NFC, case-folded) into an Aho-Corasick automaton of their beginnings, and then
finds every term of a text in one pass over it, however many terms there are (a term longer than the
beginning it read is searched for only in a text where its beginning occurs). For a glossary of a few
terms the plain searches are quicker (each runs in C), so below :data:`_AUTOMATON_FROM` terms they are
what runs; both give the same answer.
"""

from __future__ import annotations

import unicodedata
from collections import deque
from collections.abc import Sequence

from contract.controls import MAX_GLOSSARY_TERMS

_AUTOMATON_FROM = 256
"""From this many distinct terms on, one pass of the automaton beats a search per term."""

_PREFIX_CHARS = 16
"""The automaton reads this many characters of each term at most (see :class:`_Automaton`)."""


def _folded(text: str) -> str:
    """``text`` as terms are compared: NFC, then case-folded."""
    return unicodedata.normalize("NFC", text).casefold()


class TermFinder:
    """A glossary's entries, read once, asked which of them occur in one text after another."""

    def __init__(self, entries: Sequence[tuple[str, str]]) -> None:
        self._entries = list(entries)
        self._terms: dict[str, list[int]] = {}  # folded source term -> the entries it stands for, in order
        for index, (source, _) in enumerate(self._entries):
            self._terms.setdefault(_folded(source), []).append(index)
        self._automaton = _Automaton(list(self._terms)) if len(self._terms) >= _AUTOMATON_FROM else None

    def terms_in(self, text: str) -> dict[str, str]:
        """The entries whose source term occurs in ``text`` (ignoring case): the glossary one job carries.

        A job carries at most :data:`~contract.controls.MAX_GLOSSARY_TERMS`, and only those in its
        text matter to its prompt (past that many found, the longest are kept: a longer term is the
        more specific one).
        """
        folded = _folded(text)
        if self._automaton is None:
            found = [term for term in self._terms if term in folded]
        else:
            found = self._automaton.found_in(folded)
        return self._capped(sorted(index for term in found for index in self._terms[term]))

    def every_term(self) -> dict[str, str]:
        """Every entry, the longest first past :data:`~contract.controls.MAX_GLOSSARY_TERMS`."""
        return self._capped(range(len(self._entries)))

    def _capped(self, indexes: Sequence[int]) -> dict[str, str]:
        found = [self._entries[index] for index in indexes]
        if len(found) > MAX_GLOSSARY_TERMS:
            found = sorted(found, key=lambda entry: -len(entry[0]))[:MAX_GLOSSARY_TERMS]
        return dict(found)


class _Automaton:
    """Aho-Corasick over the first :data:`_PREFIX_CHARS` characters of ``terms``: which occur in a text, in one pass.

    A term no longer than that is found outright; a longer one whose beginning occurs is then searched for
    in the text (once, in C). Reading only the beginnings bounds the automaton whatever the terms' length
    (10,000 terms: at most 160,000 nodes, about 35 MB; a real glossary's share their beginnings, a few MB).
    """

    def __init__(self, terms: list[str]) -> None:
        self._next: list[dict[str, int]] = [{}]  # node -> character -> node (node 0: the root)
        self._terms: dict[int, list[str]] = {}  # node -> the terms that begin with (or are) the string it spells
        for term in terms:
            node = 0
            for char in term[:_PREFIX_CHARS]:
                following = self._next[node].get(char)
                if following is None:
                    following = len(self._next)
                    self._next[node][char] = following
                    self._next.append({})
                node = following
            self._terms.setdefault(node, []).append(term)
        self._fail = [0] * len(self._next)  # the longest proper suffix of a node's string that is a node
        self._ends = [0] * len(self._next)  # the nearest node on the fail chain that has terms (0: none)
        queue = deque(self._next[0].values())
        while queue:
            node = queue.popleft()
            for char, child in self._next[node].items():
                fail = self._fail[node]
                while fail and char not in self._next[fail]:
                    fail = self._fail[fail]
                fallback = self._next[fail].get(char, 0)
                self._fail[child] = fallback if fallback != child else 0
                target = self._fail[child]
                self._ends[child] = target if target in self._terms else self._ends[target]
                queue.append(child)

    def found_in(self, text: str) -> list[str]:
        """The terms occurring in ``text`` (already folded), each once."""
        next_, fail, ends, has_terms = self._next, self._fail, self._ends, self._terms
        seen: set[int] = set()
        node = 0
        for char in text:
            while node and char not in next_[node]:
                node = fail[node]
            node = next_[node].get(char, 0)
            hit = node if node in has_terms else ends[node]
            # A node seen before had its whole chain of shorter strings collected then: stop there.
            while hit and hit not in seen:
                seen.add(hit)
                hit = ends[hit]
        return [
            term
            for node in seen
            for term in self._terms[node]
            if len(term) <= _PREFIX_CHARS or term in text  # a long term: its beginning occurs, does the rest?
        ]
