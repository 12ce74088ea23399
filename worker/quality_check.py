"""The weight-free quality check every finished translation gets: ``{flag: evidence}`` for the row.

Each check is a small pure function of the source, the translation and the job's languages that
returns the evidence of one flag (a sentence a user can act on) or ``None``. They are tuned to stay
quiet on correct translations: a flag should be worth a look, so each check stands back where its
signal is weak (short texts, names, numbers or code only). :func:`check_translation` runs them all;
``docs/concepts/quality-flags.md`` tells each rule and what is known of its false flags.

Cost: the language detector is most of it (py3langid, a state machine in Python over the bytes of
the first :data:`DETECTION_SAMPLE_CHARS` characters: about three quarters of the check's CPU time);
the rest are string passes and counters, linear in the text, each skipped when the characters it
looks for are absent; about 0.3 ms of CPU per job in all. The worker runs it off its event loop, in
the child processes of :class:`worker.quality_pool.QualityCheckPool` (``DRAGOMAN_QUALITY_CHECK_PROCESSES``,
batched, :class:`CheckInput` is what travels), so the core that feeds the engine does not pay it.
bench/RESULTS.md ("Issue 34: what the quality checks cost the pipeline") has the numbers.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import NamedTuple, Protocol

from contract.controls import glossary_misses
from contract.inline_tags import has_tags, strip_tags, tag_problem
from contract.placeholders import PLACEHOLDER, placeholder_difference
from contract.quality import QualityFlag, QualityFlags
from contract.repetition import repeating_tail
from contract.schemas import JobSpec

WRONG_LANGUAGE_MIN_LETTERS = 24
"""Letters an output needs (placeholders, tags, numbers and URLs left out) before its language is judged."""
WRONG_LANGUAGE_MIN_PROBABILITY = 0.9
"""How sure the detector must be of another language; below it a short or mixed text is given the benefit of doubt."""
DETECTION_SAMPLE_CHARS = 160
"""Characters of the output the detector reads: enough to tell a language, and the check's cost stays flat."""
CONFUSABLE = (frozenset({"no", "nb", "nn", "da"}), frozenset({"hr", "sr", "bs"}), frozenset({"ms", "id"}))
"""Languages the detector tells apart poorly on short texts: an output detected as a sibling of the target passes."""

UNTRANSLATED_MIN_WORDS = 3
"""Words a source needs before an output equal to it counts as untranslated (names and labels stay as they are)."""
UNTRANSLATED_OVERLAP = 0.8
"""Share of the output's words that are the source's words (the larger side counted) taken as 'not translated'."""
UNTRANSLATED_SAMPLE_CHARS = 400
"""Characters of each side compared: a copied source shows in its first few hundred characters."""

LENGTH_MIN_SOURCE_CHARS = 30
"""Source characters (spaces left out) below which the length ratio is not judged: "OK" -> "D'accord" is fine."""
LENGTH_BAND = 3.0
"""An output more than this many times longer, or shorter, than its source is flagged (Latin-equivalent characters)."""
DENSE_SCRIPT_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", 3.0),  # Han
    ("\uac00-\ud7af", 2.0),  # Hangul syllables
    ("\u3040-\u30ff", 1.5),  # kana
)
"""Latin characters one character of a dense script stands for (the same content takes fewer of them).

Lengths are counted character by character this way, so a message that mixes scripts (Japanese
with option names and placeholders in ASCII) is measured fairly; other scripts' densities are
within the band of Latin's.
"""

REPETITION_MIN_REPEATS = 4
REPETITION_MIN_WORDS = 12
"""A looping tail of words: a span repeated at least 4 times, covering at least 12 words."""
REPETITION_MIN_CHARACTERS = 48
"""For an output without spaces between words (Chinese, Japanese, Thai): the loop is looked for in characters."""

_NUMBER = re.compile(r"\d{1,3}(?:[,.\u00a0\u202f' ]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?")
_DIGITS = re.compile(r"\D")
_URL = re.compile(r"\b(?:https?://|www\.)\S+|(?<!\S)[^\s@]+@[^\s@]+\.\w+")
_HTML_TAG = re.compile(r"</?([a-zA-Z][\w:-]*)(?:\s[^<>]*)?/?>")
_LETTERS = re.compile(r"[^\W\d_]+")
_CODE_CHARACTERS = frozenset("_/\\()")
_PUNCTUATION = "\"'“”‘’„«»()[]{}<>.,;:!?¿¡…—–*"
_DIGIT = re.compile(r"\d")
_PREFILTER_SHARE = 0.4
_DENSE = [(re.compile(f"[{characters}]"), weight) for characters, weight in DENSE_SCRIPT_WEIGHTS]
_HTML_ELEMENTS = frozenset(
    "a abbr b big blockquote br button center cite code del div em font h1 h2 h3 h4 h5 h6 hr i img input ins kbd "
    "label li mark ol p pre q s samp small span strike strong sub sup table td th tr tt u ul var".split()
)


class LanguageGuesser(Protocol):
    """What the check needs of :class:`contract.language_detection.LanguageDetector`."""

    def guess(self, text: str) -> tuple[str | None, float]:
        """The most probable language of ``text`` and its probability."""
        ...


def check_translation(spec: JobSpec, translation: str, detector: LanguageGuesser | None) -> QualityFlags:
    """Every check on one finished translation job; ``detector`` ``None`` leaves ``wrong_language`` out."""
    return check_texts(
        CheckInput(spec.text, translation, spec.source_lang, spec.target_lang, spec.glossary, spec.inline_tags),
        detector,
    )


class CheckInput(NamedTuple):
    """What the checks read of a job and its output: small and picklable, sent as is to a check process."""

    source: str
    translation: str
    source_lang: str
    target_lang: str
    glossary: dict[str, str]
    inline_tags: bool


def check_texts(item: CheckInput, detector: LanguageGuesser | None) -> QualityFlags:
    """Every check on one source and its translation; ``detector`` ``None`` leaves ``wrong_language`` out."""
    source, translation, source_lang, target_lang = item.source, item.translation, item.source_lang, item.target_lang
    found: dict[QualityFlag, str | None] = {
        QualityFlag.WRONG_LANGUAGE: (
            wrong_language(translation, target_lang, detector) if detector is not None else None
        ),
        QualityFlag.UNTRANSLATED: untranslated(source, translation, source_lang, target_lang),
        QualityFlag.LENGTH_RATIO: length_ratio(source, translation, source_lang, target_lang),
        QualityFlag.NUMBERS: numbers(source, translation),
        QualityFlag.PLACEHOLDERS: placeholders(source, translation),
        QualityFlag.TAGS: tags(source, translation, inline_tags=item.inline_tags),
        QualityFlag.GLOSSARY: glossary(item.glossary, source, translation),
        QualityFlag.REPETITION: repetition(source, translation),
    }
    return {flag.value: evidence for flag, evidence in found.items() if evidence is not None}


# --- the checks, one flag each ---------------------------------------------------------------


def wrong_language(translation: str, target_lang: str, detector: LanguageGuesser) -> str | None:
    """The output is confidently in a language other than the target (and long enough to tell)."""
    prose = _prose(translation[: DETECTION_SAMPLE_CHARS * 2])
    if sum(map(len, _LETTERS.findall(prose, 0, DETECTION_SAMPLE_CHARS))) < WRONG_LANGUAGE_MIN_LETTERS:
        return None
    language, probability = detector.guess(prose[:DETECTION_SAMPLE_CHARS])
    if language is None or probability < WRONG_LANGUAGE_MIN_PROBABILITY or _same_language(language, target_lang):
        return None
    return f"the output reads as {language} ({probability:.0%} sure), not {target_lang}"


def untranslated(source: str, translation: str, source_lang: str, target_lang: str) -> str | None:
    """The output is (nearly) the source, between two different languages, and the source is prose.

    A source of fewer than :data:`UNTRANSLATED_MIN_WORDS` words, or whose words are all
    capitalised (names, titles, acronyms) or code-like (``snake_case``, paths, ``--options``), is
    legitimately kept as it is. An empty output for a source with words is untranslated too,
    whatever the languages: the model answered nothing.
    """
    if not translation.strip() and _prose_words(source):
        return "the translation is empty"
    if _same_language(source_lang, target_lang):
        return None
    source, translation = source[:UNTRANSLATED_SAMPLE_CHARS], translation[:UNTRANSLATED_SAMPLE_CHARS]
    tokens = set(source.casefold().split())
    if not tokens or len(tokens.intersection(translation.casefold().split())) < _PREFILTER_SHARE * len(tokens):
        return None  # most of the source's tokens are not in the output: no need to look closer
    written = _prose_words(source)
    if len(written) < UNTRANSLATED_MIN_WORDS or not any(word[:1].islower() for word in written):
        return None
    words = Counter(map(str.casefold, written))
    output = Counter(map(str.casefold, _prose_words(translation)))
    if not output:
        return None
    shared = sum((words & output).values())
    words_count, output_count = len(written), sum(output.values())
    larger = max(words_count, output_count)
    share = shared / larger
    if share < UNTRANSLATED_OVERLAP:
        return None
    return f"the output is the source's own words ({shared} of {larger}, {share:.0%})"


def length_ratio(source: str, translation: str, source_lang: str, target_lang: str) -> str | None:
    """The output is over :data:`LENGTH_BAND` times longer or shorter than the source (long enough sources only).

    ``source_lang`` and ``target_lang`` are not needed: lengths are weighed by script character by character.
    """
    if _visible_length(source) < LENGTH_MIN_SOURCE_CHARS:
        return None
    ratio = _weighted_length(translation) / _weighted_length(source)
    if 1 / LENGTH_BAND <= ratio <= LENGTH_BAND:
        return None
    return (
        f"the output is {ratio:.2f}x as long as the source (expected {1 / LENGTH_BAND:.2f}-{LENGTH_BAND:.0f}x, "
        "Han, Hangul and kana characters weighed by their density)"
    )


def numbers(source: str, translation: str) -> str | None:
    """Numbers of the source missing from the output (or changed); locale formatting is tolerated.

    A number is compared by its digits alone (``1,000.5``, ``1 000,5`` and ``1.000,5`` are the
    same) without leading zeros; numbers inside placeholders, tags and URLs are not numbers. A
    one-digit number a translation may spell out ("3" -> "trois") is not required.
    """
    expected, written = _numbers(source)
    if not expected:
        return None
    found, written_out = _numbers(translation)
    missing = +Counter({number: count for number, count in (expected - found).items() if len(number) > 1})
    # A space groups digits in some locales ("1 000") and separates numbers in others ("page 25 200"):
    # a spaced number counts as present when its parts are.
    parts = found + Counter(_space_parts(written_out))
    for number in list(missing):
        pieces = _space_parts({number: written[number]})
        if pieces and all(parts[piece] for piece in pieces):
            del missing[number]
    for number in list(missing):
        if parts[number]:
            del missing[number]
    if not missing:
        return None
    shown = [written[number] for number in sorted(missing, key=lambda n: (len(n), n))]
    evidence = f"source number{'s' if len(shown) > 1 else ''} {', '.join(shown)} missing from the output"
    invented = [written_out[number] for number in sorted(found - expected, key=lambda n: (len(n), n))]
    if invented:
        evidence += f" (it has {', '.join(invented)} instead)"
    return evidence


def placeholders(source: str, translation: str) -> str | None:
    """Placeholders (:mod:`contract.placeholders`) of the source missing from the output, or invented."""
    missing, invented = placeholder_difference(source, translation)
    if not missing and not invented:
        return None
    parts = [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"invented {', '.join(invented)}"] if invented else []
    return "placeholders " + "; ".join(parts)


def tags(source: str, translation: str, *, inline_tags: bool) -> str | None:
    """Markup the output lost or invented: a document segment's placeholder tags, else HTML tags by name."""
    if inline_tags and has_tags(source):
        return tag_problem(source, translation)
    expected = Counter(_tag_names(source))
    found = Counter(_tag_names(translation))
    if expected == found:
        return None
    missing, invented = sorted((expected - found).elements()), sorted((found - expected).elements())
    parts = [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"invented {', '.join(invented)}"] if invented else []
    return "markup tags " + "; ".join(parts)


def glossary(terms: dict[str, str], source: str, translation: str) -> str | None:
    """Glossary terms found in the source whose target term the output lacks."""
    misses = glossary_misses(terms, source, translation) if terms else []
    if not misses:
        return None
    return "glossary terms not used: " + ", ".join(f"{term!r} -> {terms[term]!r}" for term in misses)


def repetition(source: str, translation: str) -> str | None:
    """The output ends in a span repeated again and again that the source does not repeat."""
    loop = _loop(translation)
    if loop is None or _loop(source) is not None:
        return None
    span, repeats = loop
    shown = span if len(span) <= 80 else span[:77] + "..."
    return f"the output ends in {shown!r} repeated {repeats} times"


# --- helpers ------------------------------------------------------------------------------------


def _prose(text: str) -> str:
    """``text`` without placeholders, tags, URLs and e-mail addresses: what is written in a language."""
    if "<" in text:
        text = _HTML_TAG.sub(" ", strip_tags(text) if "<x" in text else text)
    if "@" in text or "://" in text or "www." in text:
        text = _URL.sub(" ", text)
    if "%" in text or "{" in text or "$" in text:
        text = PLACEHOLDER.sub(" ", text)
    return text


def _prose_words(text: str) -> list[str]:
    """The words of ``text`` as written: letters only, without placeholders, markup, URLs, code-like tokens
    (``snake_case``, paths, calls, ``--options``, ``user.name``), numbers and surrounding punctuation.

    String methods in one comprehension, no regular expression per token: this runs on every output.
    """
    tokens = (
        token.strip(_PUNCTUATION)
        for token in _prose(text).split()
        if _CODE_CHARACTERS.isdisjoint(token) and not (token[0] == "-" and len(token) > 1)
    )
    return [word for word in tokens if word.isalpha()]


def _same_language(first: str, second: str) -> bool:
    """Whether two language tags name the same language (or two the detector confuses)."""
    a, b = first.split("-", 1)[0].lower(), second.split("-", 1)[0].lower()
    return a == b or any(a in group and b in group for group in CONFUSABLE)


def _visible_length(text: str) -> int:
    return len("".join(text.split()))


def _weighted_length(text: str) -> float:
    """Characters, spaces left out, those of a dense script weighed by :data:`DENSE_SCRIPT_WEIGHTS`."""
    extra = 0.0 if text.isascii() else sum((weight - 1) * len(pattern.findall(text)) for pattern, weight in _DENSE)
    return max(1.0, _visible_length(text) + extra)


def _numbers(text: str) -> tuple[Counter[str], dict[str, str]]:
    """The numbers of ``text`` by their digits (leading zeros dropped), and each as first written."""
    out: Counter[str] = Counter()
    written: dict[str, str] = {}
    if _DIGIT.search(text) is None:
        return out, written
    prose = _prose(text if text.isascii() else unicodedata.normalize("NFKC", text))
    for match in _NUMBER.finditer(prose):
        digits = _DIGITS.sub("", match.group(0)).lstrip("0") or "0"
        out[digits] += 1
        written.setdefault(digits, match.group(0))
    return out, written


def _space_parts(written: dict[str, str]) -> list[str]:
    """The numbers a plain space separates in the written numbers (digits only, as :func:`_numbers` keys them)."""
    out: list[str] = []
    for raw in written.values():
        if " " in raw:
            out += [_DIGITS.sub("", part).lstrip("0") or "0" for part in raw.split(" ")]
    return out


def _tag_names(text: str) -> list[str]:
    """HTML element tags of ``text`` by name (``/b`` for a closing one); ``<file>``-style metavariables are not tags."""
    names = []
    for match in _HTML_TAG.finditer(text):
        name = match.group(1).lower()
        if name in _HTML_ELEMENTS:
            names.append(("/" if match.group(0).startswith("</") else "") + name)
    return names


def _loop(text: str) -> tuple[str, int] | None:
    """The repeated span of a looping tail of ``text`` and how often it repeats, in words (or characters)."""
    words = text.split()
    if len(words) >= REPETITION_MIN_WORDS:
        found = repeating_tail(words, min_repeats=REPETITION_MIN_REPEATS, min_length=REPETITION_MIN_WORDS)
        if found is not None:
            return " ".join(str(word) for word in found.span(words)), found.repeats
    if len(text) >= REPETITION_MIN_CHARACTERS and len(words) * 8 < len(text):  # no spaces between words
        chars = text.strip()
        hit = repeating_tail(chars, min_repeats=REPETITION_MIN_REPEATS, min_length=REPETITION_MIN_CHARACTERS)
        if hit is not None:
            return "".join(str(char) for char in hit.span(chars)), hit.repeats
    return None
