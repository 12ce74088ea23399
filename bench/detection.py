"""Issue 49: language detectors on short UI strings, side by side (accuracy, cost per call, load and memory).

Reads the labelled sample ``bench/samples/ui-strings.tsv`` (``bench.ui_strings``: 30 strings of one to
four words per language, twenty languages, from the machine's gettext catalogues) and measures each
detector in a child process of its own, so that its import, model load and resident memory are its
alone:

- ``top1``: the detector's most probable language is the catalogue's (``no`` counts as ``nb``);
- ``sure`` and ``sure_right``: how many strings the detector is sure of under dragoman's rule (a
  probability of at least 50%, or at least 10% and three times the runner-up's: what
  ``source_lang: auto`` accepted before issue 49) and how many of those are right;
- cost: the median and mean microseconds of one call that ranks the languages of one string (what
  the detection needs), after a warm-up, on one thread; and of one ~300-character text;
- ``load_s`` and ``rss_mb``: import plus model load, and the process's peak resident memory after it.

From the repository root (a detector whose package is not installed is reported as missing):

    python -m bench.detection --out bench/results/detection.json

Each detector's rankings also go through dragoman's best guess (:func:`contract.language_detection.choose_language`,
the default ``en`` always the last hint) in four situations: the string alone; in a request of five strings
of its language (the request's language is a hint when the detector is sure of the five together); from a
key whose recent language is the string's; from a key whose recent language is another one (a misleading
hint). English and the other nineteen languages are counted apart: the default helps the first.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from contract.errors import InvalidJobError
from contract.language_detection import HINT_FACTOR, choose_language, is_sure
from contract.languages import normalize_language

SAMPLE = Path(__file__).parent / "samples" / "ui-strings.tsv"

DEEPL_SOURCES = (
    "ar bg cs da de el en es et fi fr he hu id it ja ko lt lv nb nl pl pt ro ru sk sl sv th tr uk vi zh".split()
)
"""DeepL's source languages: a candidate set a deployment might restrict detection to."""

DETECTORS = ("py3langid", "py3langid-deepl", "lingua-high", "lingua-low", "lingua-high-deepl")
"""Each detector as the bench builds it: ``-deepl`` ones restricted to :data:`DEEPL_SOURCES`."""

MIN_CONFIDENCE = 0.5
LEAD_FACTOR = 3.0
FLOOR = 0.1

Ranker = Callable[[str], list[tuple[str, float]]]


def read_sample(path: Path = SAMPLE) -> list[tuple[str, str, str]]:
    """(language, domain, text) rows of the sample, its commented header skipped."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        if line.startswith("#") or line.startswith("language\t") or not line.strip():
            continue
        language, domain, text = line.split("\t", 2)
        rows.append((language, domain, text))
    return rows


def same(found: str | None, label: str) -> bool:
    """Whether a detector's code names the label's language (base subtag; ``no`` is Bokmål)."""
    if found is None:
        return False
    base = found.lower().replace("_", "-").split("-")[0]
    return {"no": "nb"}.get(base, base) == label


def sure(ranked: list[tuple[str, float]]) -> bool:
    """dragoman's confidence rule before issue 49: 50%, or a 10% best guess three times the runner-up's."""
    if not ranked:
        return False
    best = ranked[0][1]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    return best >= MIN_CONFIDENCE or (best >= FLOOR and best >= LEAD_FACTOR * runner_up)


def build(name: str) -> Ranker:
    """The named detector as a function from a text to its (code, probability) ranking, most probable first."""
    if name.startswith("py3langid"):
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        if name.endswith("-deepl"):
            known = set(identifier.nb_classes)
            identifier.set_languages([code for code in DEEPL_SOURCES if code in known] + ["no"])

        def rank_langid(text: str) -> list[tuple[str, float]]:
            return [(str(code), float(p)) for code, p in identifier.rank(text)]

        return rank_langid
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if name.endswith("-deepl"):
        languages = [Language.from_iso_code_639_1(IsoCode639_1.from_str(code)) for code in DEEPL_SOURCES]
        builder = LanguageDetectorBuilder.from_languages(*languages)
    else:
        builder = LanguageDetectorBuilder.from_all_languages()
    builder = builder.with_preloaded_language_models()
    if name.startswith("lingua-low"):
        builder = builder.with_low_accuracy_mode()
    detector = builder.build()

    def rank_lingua(text: str) -> list[tuple[str, float]]:
        return [
            (value.language.iso_code_639_1.name.lower(), value.value)
            for value in detector.compute_language_confidence_values(text)
        ]

    return rank_lingua


def _micros(rank: Ranker, texts: Sequence[str], rounds: int) -> list[float]:
    for text in texts[:50]:  # warm-up: lazily built tables, caches
        rank(text)
    times = []
    for _ in range(rounds):
        for text in texts:
            start = time.perf_counter_ns()
            rank(text)
            times.append((time.perf_counter_ns() - start) / 1000)
    return times


SITUATIONS = ("alone", "request", "recent-right", "recent-wrong")
DEFAULT_LANGUAGE = "en"


def canonical(ranked: list[tuple[str, float]]) -> list[tuple[str | None, float]]:
    """A detector's ranking in dragoman's canonical codes (``None``: a label naming no language; ``no`` is ``nb``)."""
    found: list[tuple[str | None, float]] = []
    for code, probability in ranked:
        try:
            language: str | None = normalize_language({"no": "nb"}.get(code, code))
        except InvalidJobError:
            language = None
        found.append((language, probability))
    return found


def best_guesses(
    rank: Ranker, rows: list[tuple[str, str, str]], hint_factor: float = HINT_FACTOR
) -> dict[str, dict[str, int]]:
    """Right best guesses per situation (:data:`SITUATIONS`), English and the other languages apart."""
    rng = random.Random(49)
    by_language: dict[str, list[str]] = defaultdict(list)
    for language, _, text in rows:
        by_language[language].append(text)
    languages = sorted(by_language)
    counts = {situation: {"en": 0, "other": 0} for situation in SITUATIONS}
    for language, _, text in rows:
        ranked = canonical(rank(text))
        others = rng.sample([other for other in by_language[language] if other != text], 4)
        together = canonical(rank("\n".join([text, *others])))
        request = [str(together[0][0])] if is_sure(together) else []
        misleading = rng.choice([other for other in languages if other != language])
        hints = {
            "alone": [DEFAULT_LANGUAGE],
            "request": [*request, DEFAULT_LANGUAGE],
            "recent-right": [language, DEFAULT_LANGUAGE],
            "recent-wrong": [misleading, DEFAULT_LANGUAGE],
        }
        for situation, situation_hints in hints.items():
            guess = choose_language(ranked, situation_hints, hint_factor=hint_factor)
            counts[situation]["en" if language == "en" else "other"] += same(guess.language, language)
    return counts


def measure_one(
    name: str, rows: list[tuple[str, str, str]], rounds: int, hint_factors: Sequence[float] = ()
) -> dict[str, Any]:
    """Everything about one detector, in this process (the parent runs each in a child of its own)."""
    start = time.perf_counter()
    try:
        rank = build(name)
    except ImportError as exc:
        return {"detector": name, "missing": str(exc)}
    rank("warm up")
    load_s = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_language: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    top1 = sure_count = sure_right = 0
    wrong: list[str] = []
    for language, _, text in rows:
        ranked = rank(text)
        best = ranked[0][0] if ranked else None
        right = same(best, language)
        top1 += right
        per_language[language][0] += right
        per_language[language][1] += 1
        if sure(ranked):
            sure_count += 1
            sure_right += right
        if not right and len(wrong) < 400:
            wrong.append(f"{language}:{text} -> {best}")
    texts = [text for _, _, text in rows]
    short = _micros(rank, texts, rounds)
    rng = random.Random(49)
    by_language: dict[str, list[str]] = defaultdict(list)
    for language, _, text in rows:
        by_language[language].append(text)
    long_texts = []
    for strings in by_language.values():  # one language's strings joined: a ~300-character text
        shuffled = rng.sample(strings, len(strings))
        long_texts.append(". ".join(shuffled)[:300])
    long = _micros(rank, long_texts, max(1, rounds * 5))
    return {
        "detector": name,
        "strings": len(rows),
        "english_strings": sum(language == "en" for language, _, _ in rows),
        "top1": top1,
        "sure": sure_count,
        "sure_right": sure_right,
        "per_language_top1": {k: v[0] for k, v in sorted(per_language.items())},
        "short_us_median": statistics.median(short),
        "short_us_mean": statistics.fmean(short),
        "long_us_median": statistics.median(long),
        "best_guess": best_guesses(rank, rows),
        "hint_factors": {str(factor): best_guesses(rank, rows, factor) for factor in hint_factors},
        "load_s": load_s,
        "rss_mb": rss_mb,
        "wrong": wrong,
    }


def measure(names: Sequence[str], sample: Path, rounds: int, hint_factors: str) -> list[dict[str, Any]]:
    """Each detector measured in a child process of its own (import, load and memory its alone)."""
    results = []
    for name in names:
        child = [sys.executable, "-m", "bench.detection", "--one", name, "--sample", str(sample)]
        child += ["--rounds", str(rounds), "--hint-factors", hint_factors]
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout))
        print(f"{name}: measured", file=sys.stderr, flush=True)
    return results


def table(results: list[dict[str, Any]]) -> str:
    """The Markdown table of bench/RESULTS.md."""
    lines = [
        "| detector | top-1 right | sure (old rule) | right when sure | µs/call short (median / mean) "
        "| µs/call 300 chars | load s | peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if "missing" in r:
            lines.append(f"| {r['detector']} | not installed: {r['missing']} | | | | | | |")
            continue
        n = r["strings"]
        lines.append(
            f"| {r['detector']} | {r['top1']}/{n} ({r['top1'] / n:.0%}) | {r['sure']}/{n} ({r['sure'] / n:.0%}) "
            f"| {r['sure_right']}/{r['sure']} | {r['short_us_median']:.0f} / {r['short_us_mean']:.0f} "
            f"| {r['long_us_median']:.0f} | {r['load_s']:.1f} | {r['rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def guess_table(results: list[dict[str, Any]]) -> str:
    """The best-guess rows: right guesses per situation, English strings and the others apart."""
    lines = [
        "| detector | " + " | ".join(SITUATIONS) + " |",
        "| --- | " + " | ".join("---" for _ in SITUATIONS) + " |",
    ]
    for r in results:
        if "missing" in r:
            continue
        english = r["english_strings"]
        cells = []
        for situation in SITUATIONS:
            got = r["best_guess"][situation]
            other = r["strings"] - english
            total = got["en"] + got["other"]
            cells.append(
                f"{total}/{r['strings']} ({total / r['strings']:.0%}; en {got['en']}/{english}, "
                f"others {got['other']}/{other})"
            )
        lines.append(f"| {r['detector']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def factor_table(results: list[dict[str, Any]]) -> str:
    """Right best guesses alone and with a misleading hint, for each ``--hint-factors`` value, per detector."""
    lines = ["| detector | HINT_FACTOR | alone: en / others | recent, another language: en / others |"]
    lines.append("| --- | --- | --- | --- |")
    for r in results:
        for factor, counts in r.get("hint_factors", {}).items():
            alone, wrong = counts["alone"], counts["recent-wrong"]
            lines.append(
                f"| {r['detector']} | {float(factor):g} | {alone['en']} / {alone['other']} "
                f"| {wrong['en']} / {wrong['other']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Measure the detectors (``--one``: one, in this process, as JSON on stdout) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detectors", default=",".join(DETECTORS))
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the sample")
    parser.add_argument(
        "--hint-factors", default="5,10,20", help="HINT_FACTOR values whose best guesses are counted too (comma list)"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = read_sample(args.sample)
    if args.one:
        factors = [float(factor) for factor in args.hint_factors.split(",") if factor]
        print(json.dumps(measure_one(args.one, rows, args.rounds, factors)))
        return
    results = measure(args.detectors.split(","), args.sample, args.rounds, args.hint_factors)
    report: dict[str, Any] = {"detectors": results}
    print(table(results))
    print()
    print(guess_table(results))
    print()
    print(factor_table(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
