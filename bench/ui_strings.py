"""Issue 49: a labelled set of short UI strings, from the machine's own gettext catalogues.

A language detector for the DeepL and LibreTranslate doors has to tell ``Save``, ``Abbrechen`` and
``Настройки`` apart: one to four words, the texts Weblate and the DeepL SDK send most. The machine's
``/usr/share/locale/<locale>/LC_MESSAGES/<domain>.mo`` files are such strings, translated by people,
labelled by their catalogue's locale. This script reads them (Babel's ``.mo`` reader, the same as
``msgunfmt``), keeps the translations of one to four words (menu items, buttons, labels: mnemonics
``_``/``&`` and a trailing ``…``/``:`` removed; format strings, markup, paths and untranslated
copies of the English left out), and draws a fixed sample per language (the English from the same
catalogues' msgids) into ``bench/samples/ui-strings.tsv``: ``language``, ``domain``, ``text``, with
the Debian packages the catalogues came from in its header. From the repository root:

    python -m bench.ui_strings --per-language 30 --seed 49 --out bench/samples/ui-strings.tsv

``bench.detection`` measures the detectors on it.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from babel.messages.mofile import read_mo

LOCALE_ROOT = Path("/usr/share/locale")

DOMAINS = (
    "gtk30",
    "glib20",
    "libhandy",
    "libsecret",
    "notification-daemon",
    "system-config-printer",
    "software-properties",
    "PackageKit",
    "xdg-user-dirs",
    "gsettings-desktop-schemas",
    "appstream",
    "avahi",
    "at-spi2-core",
    "gdk-pixbuf",
    "apt",
)
"""Catalogues of user interfaces (desktop toolkits, dialogs, settings), not of command-line diagnostics."""

LANGUAGES = {
    "en": None,  # the msgids of the other catalogues
    "de": "de",
    "fr": "fr",
    "es": "es",
    "it": "it",
    "pt": "pt_BR",
    "nl": "nl",
    "sv": "sv",
    "da": "da",
    "nb": "nb",
    "pl": "pl",
    "cs": "cs",
    "ru": "ru",
    "uk": "uk",
    "tr": "tr",
    "fi": "fi",
    "hu": "hu",
    "ja": "ja",
    "zh": "zh_CN",
    "ko": "ko",
}
"""Each label's catalogue locale: twenty languages, neighbours among them (da/nb/sv, ru/uk, es/pt/it)."""

_MSGID = "msgid"
_MNEMONIC = re.compile(r"_(?=\w)|&(?=\w)|\(_\w\)|\(&\w\)")
_UNWANTED = re.compile(r"[%{}<>\\/@=|\[\]$#;\t\n]|https?:|\d")
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")  # kana, CJK ideographs, hangul syllables
_MOST_WIDE_CHARS = 10
_TRAILING = re.compile(r"(\s*(…|\.\.\.|:|：))+$")


def cleaned(text: str) -> str | None:
    """``text`` as a user sees it on a button or a label, or ``None`` when it is not such a string.

    Mnemonics (``_Save``, ``&Open``, ``(_S)``) and a trailing ellipsis or colon go; format strings,
    markup, paths, digits and line breaks leave the string out; one to four words (ten characters of Japanese,
    Chinese or Korean), at least three letters.
    """
    text = _TRAILING.sub("", _MNEMONIC.sub("", text).strip()).strip()
    if not text or _UNWANTED.search(text):
        return None
    if len(text.split()) > 4 or sum(ch.isalpha() for ch in text) < 3:
        return None
    if _WIDE.search(text) and len(text) > _MOST_WIDE_CHARS:  # no spaces between words: a sentence is one "word"
        return None
    return text


def _catalogue(locale: str, domain: str) -> Path | None:
    path = LOCALE_ROOT / locale / "LC_MESSAGES" / f"{domain}.mo"
    return path if path.is_file() else None


def _pairs(path: Path) -> Iterator[tuple[str, str]]:
    """(msgid, msgstr) of every singular, context-free or not, translated message of a ``.mo`` file."""
    with path.open("rb") as handle:
        catalog = read_mo(handle)
    for message in catalog:
        if not message.id or isinstance(message.id, tuple | list) or not isinstance(message.string, str):
            continue
        if message.string:
            yield str(message.id), message.string


def candidates(language: str, locale: str | None) -> dict[str, str]:
    """Every usable string of ``language`` (text -> its domain): a catalogue's msgstr, or for English the msgids
    of the French catalogues (English source strings, the same interfaces)."""
    found: dict[str, str] = {}
    for domain in DOMAINS:
        path = _catalogue(locale or "fr", domain)
        if path is None:
            continue
        for msgid, msgstr in _pairs(path):
            source, target = cleaned(msgid), cleaned(msgstr)
            if locale is None:
                if source is not None:
                    found.setdefault(source, domain)
            elif target is not None and target.casefold() != (source or msgid).casefold():
                found.setdefault(target, domain)  # an untranslated copy of the English says nothing of its language
    return found


def packages(domains: Iterable[str]) -> list[str]:
    """The Debian packages (with versions) the French catalogues of ``domains`` belong to, for the sample's header."""
    owners: set[str] = set()
    for domain in domains:
        path = _catalogue("fr", domain)
        if path is None:
            continue
        result = subprocess.run(["dpkg", "-S", str(path)], capture_output=True, text=True, check=False)
        owners.update(line.split(":")[0] for line in result.stdout.splitlines() if ":" in line)
    versions = []
    for owner in sorted(owners):
        result = subprocess.run(
            ["dpkg-query", "-W", "-f=${Package} ${Version}", owner], capture_output=True, text=True, check=False
        )
        versions.append(result.stdout.strip() or owner)
    return versions


def sample(per_language: int, seed: int) -> list[tuple[str, str, str]]:
    """``per_language`` (language, domain, text) rows of each language, drawn with ``seed``, sorted."""
    rng = random.Random(seed)
    rows: list[tuple[str, str, str]] = []
    for language, locale in LANGUAGES.items():
        found = candidates(language, locale)
        texts = sorted(found)
        chosen = rng.sample(texts, min(per_language, len(texts)))
        rows.extend((language, found[text], text) for text in chosen)
        print(f"{language}: {len(texts):,} usable strings, {len(chosen)} drawn", file=sys.stderr)
    return sorted(rows)


def main(argv: list[str] | None = None) -> None:
    """Write the sample as a TSV file with a commented header naming its sources."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=30)
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--out", type=Path, default=Path("bench/samples/ui-strings.tsv"))
    args = parser.parse_args(argv)
    rows = sample(args.per_language, args.seed)
    header = [
        "# Short UI strings (1-4 words) labelled with their catalogue's language: bench/ui_strings.py",
        f"# python -m bench.ui_strings --per-language {args.per_language} --seed {args.seed}",
        f"# from /usr/share/locale/<locale>/LC_MESSAGES/<domain>.mo of: {', '.join(DOMAINS)}",
        f"# locales: {', '.join(f'{k}={v or _MSGID}' for k, v in LANGUAGES.items())}",
        f"# packages: {'; '.join(packages(DOMAINS))}",
        "language\tdomain\ttext",
    ]
    lines = [*header, *("\t".join(row) for row in rows)]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(rows)} strings written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
