"""How often each quality flag fires on correct translations: human msgstr of the system's gettext catalogs.

    python -m bench.quality_flags [--languages fr de es ru ja zh_CN] [--out bench/out/quality-flags.json]

Every ``.mo`` catalog of a few common packages (coreutils, apt, dpkg, grep, bash, tar, wget, sed,
findutils, diffutils) found under /usr/share/locale for each language is decompiled with
``msgunfmt`` (GNU gettext, then ``msgconv -t UTF-8``); each message and its human translation go
through the worker's check (``worker.quality_check.check_translation``, the real py3langid
detector) as if the translation
had come from the model. Every flag raised is a false flag, or a real defect of the catalog
(a translator's slip); the table tells how much to trust each flag. Messages in these catalogs are
short, full of printf placeholders, option names and command lines: a harsh test.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

from contract.language_detection import LanguageDetector
from contract.quality import FLAG_NAMES
from contract.schemas import JobSpec
from worker.quality_check import check_translation

PACKAGES = ("coreutils", "apt", "dpkg", "grep", "bash", "tar", "wget", "sed", "findutils", "diffutils")
_LINE = re.compile(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) "(.*)"$')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def catalog_pairs(mo: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) of each translated message of a compiled catalog (plurals: the singular form)."""
    compiled = subprocess.run(["msgunfmt", str(mo)], capture_output=True, check=True).stdout
    converted = subprocess.run(["msgconv", "-t", "UTF-8"], input=compiled, capture_output=True, check=True).stdout
    source = converted.decode()
    pairs: list[tuple[str, str]] = []
    entry: dict[str, str] = {}
    key = ""
    for line in [*source.splitlines(), ""]:
        match = _LINE.match(line)
        if match:
            key = match.group(1)
            entry[key] = _unescape(match.group(2))
        elif line.startswith('"') and key:
            entry[key] += _unescape(line[1:-1])
        elif not line.strip():
            msgid, msgstr = entry.get("msgid", ""), entry.get("msgstr", entry.get("msgstr[0]", ""))
            if msgid.strip() and msgstr.strip():
                pairs.append((msgid, msgstr))
            entry, key = {}, ""
    return pairs


def measure(language: str, detector: LanguageDetector) -> dict[str, object]:
    """Flag counts for one language's catalogs, and a few examples of each flag."""
    target = language.replace("_", "-")
    counts: Counter[str] = Counter()
    examples: dict[str, list[list[str]]] = {}
    pairs = 0
    flagged = 0
    seconds = 0.0
    for package in PACKAGES:
        mo = Path(f"/usr/share/locale/{language}/LC_MESSAGES/{package}.mo")
        if not mo.is_file():
            continue
        for msgid, msgstr in catalog_pairs(mo):
            spec = JobSpec(job_id="c", text=msgid, source_lang="en", target_lang=target, created_at=0.0)
            started = time.process_time()  # CPU time: on a shared machine, wall time mostly measures the others
            flags = check_translation(spec, msgstr, detector)
            seconds += time.process_time() - started
            pairs += 1
            flagged += bool(flags)
            for flag, evidence in flags.items():
                counts[flag] += 1
                if len(examples.setdefault(flag, [])) < 3:
                    examples[flag].append([msgid[:120], msgstr[:120], evidence])
    return {
        "language": language,
        "pairs": pairs,
        "flagged": flagged,
        "counts": {flag: counts[flag] for flag in FLAG_NAMES},
        "examples": examples,
        "cpu_us_per_check": round(seconds / max(pairs, 1) * 1e6),
    }


def main() -> None:
    """Measure each language, print a Markdown table of false-flag rates, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", nargs="+", default=["fr", "de", "es", "ru", "ja", "zh_CN"])
    parser.add_argument("--out", type=Path, default=Path("bench/out/quality-flags.json"))
    args = parser.parse_args()
    detector = LanguageDetector()
    detector._load()  # a script, not the event loop: load it up front
    results = [measure(language, detector) for language in args.languages]
    short = [flag.replace("_", " ") for flag in FLAG_NAMES]
    print("| language | pairs | any flag | " + " | ".join(short) + " | CPU µs/check |")
    print("| --- " * (len(FLAG_NAMES) + 4) + "|")
    for r in results:
        pairs = int(r["pairs"])  # type: ignore[call-overload]
        counts: dict[str, int] = r["counts"]  # type: ignore[assignment]
        cells = [f"{100 * counts[flag] / pairs:.1f}%" for flag in FLAG_NAMES]
        print(
            f"| {r['language']} | {pairs:,} | {100 * int(r['flagged']) / pairs:.1f}% | "  # type: ignore[call-overload]
            + " | ".join(cells)
            + f" | {r['cpu_us_per_check']} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
