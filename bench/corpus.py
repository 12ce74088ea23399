"""A corpus of real documents found on this machine, for the corpus test and ``bench.documents --corpus``.

None of these files was written for dragoman: HTML manuals and Markdown READMEs and changelogs
under the system's documentation (``/usr/share/doc``, gzip'd ones decompressed), gettext
catalogues decompiled from the system's ``.mo`` files with ``msgunfmt`` (and a template made from
one, every ``msgstr`` emptied), JSON code databases and API descriptions, and any subtitles,
XLIFF files and office documents the installed packages ship. The selection is deterministic
(sorted paths, a spread across packages, a cap per format and a size cap), so the same machine
always gives the same corpus; a file or tool the machine lacks is left out, never an error.
"""

from __future__ import annotations

import base64
import gzip
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

from contract.documents import SUFFIXES, ZIPPED_FORMATS

DOC_ROOT = Path("/usr/share/doc")
LOCALE_ROOT = Path("/usr/share/locale")
ISO_CODES_JSON = Path("/usr/share/iso-codes/json")
CAP = {"html": 12, "md": 10, "po": 10, "json": 8, "srt": 4, "vtt": 4, "xliff": 4}
"""How many documents of each format at most (a zipped format: :data:`ZIPPED_CAP`)."""
ZIPPED_CAP = 3
POT_CAP = 2
"""How many of the decompiled catalogues also become a template (every ``msgstr`` emptied)."""
MAX_BYTES = 250_000
"""A document's size cap (decompressed): the corpus test stays well under a minute on 2 cores."""
MIN_BYTES = 1_000
"""Smaller files are index stubs and redirects, not documents."""
MAX_MO_BYTES = 120_000
LANGUAGES = ("de", "fr", "ja", "ru", "es", "pt_BR", "zh_CN", "pl", "it", "cs", "uk", "sv")
"""The languages the decompiled catalogues rotate through (a domain without one gets its first)."""
_SUFFIXES = {suffix: fmt for suffix, fmt in SUFFIXES.items() if fmt not in ("txt", "json") and suffix != ".pot"}
"""The documents looked for under /usr/share/doc (text and JSON there are data or licences, not documents)."""
_ZIPPED = frozenset(ZIPPED_FORMATS)
_MSGSTR = re.compile(r'^(msgstr(?:\[\d+\])?) ".*"\n(?:".*"\n)*', re.MULTILINE)
_LANGUAGE = re.compile(r'^(\s*)"Language: [^"\\]*\\n"', re.MULTILINE)
_PLURAL_FORMS = re.compile(r'^(\s*)"Plural-Forms: [^"\\]*\\n"', re.MULTILINE)
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class CorpusDocument:
    """One real document: where it came from, its format and the text dragoman would store for it."""

    fmt: str
    """Its format in :data:`contract.documents.FORMATS`."""
    path: Path
    """The file on this machine it was read from."""
    label: str
    """How failures name it: the path, and how it was derived (``msgunfmt``, a template)."""
    source: str
    """The document as dragoman stores it: UTF-8 text, or base64 for a zipped format."""
    retranslate: bool = False
    """A catalogue whose entries are translated already: split with ``retranslate`` so they are sent."""


def find_corpus() -> list[CorpusDocument]:
    """Every corpus document this machine has, format by format, in a deterministic order."""
    return list(_find_corpus())


@cache
def _find_corpus() -> tuple[CorpusDocument, ...]:
    files = _files_by_format()
    documents: list[CorpusDocument] = []
    for fmt in ("html", "md"):  # manuals, READMEs and changelogs of the system's packages
        documents += _texts(fmt, _one_per_package([p for p in files.get(fmt, []) if p.is_relative_to(DOC_ROOT)]))
    documents += _catalogues(files.get("po", []))
    documents += _texts("json", _json_files())
    for fmt in ("srt", "vtt", "xliff"):
        documents += _texts(fmt, files.get(fmt, []))
    for fmt in sorted(_ZIPPED):
        for path in _spread(files.get(fmt, []), ZIPPED_CAP):
            documents.append(CorpusDocument(fmt, path, str(path), base64.b64encode(path.read_bytes()).decode()))
    return tuple(documents)


def _roots() -> list[Path]:
    """Where installed software keeps its files: system data and libraries, this Python's packages."""
    candidates = [
        Path("/usr/share"),
        Path("/usr/lib"),
        Path("/usr/local/share"),
        Path("/usr/local/lib"),
        Path("/opt"),
        Path(sysconfig.get_paths()["purelib"]),
        Path(sys.base_prefix) / "lib",
    ]
    roots: list[Path] = []
    for candidate in candidates:
        real = candidate.resolve()
        if real.is_dir() and not any(real == r or real.is_relative_to(r) for r in roots):
            roots = [r for r in roots if not r.is_relative_to(real)] + [real]
    return sorted(roots)


def _files_by_format() -> dict[str, list[Path]]:
    """Files of every known suffix (gzip'd ones too) under :func:`_roots`, sorted, within the size caps."""
    found: dict[str, list[Path]] = {}
    for root in _roots():
        for folder, subfolders, names in os.walk(root):
            subfolders.sort()
            if folder.startswith(str(LOCALE_ROOT)):
                subfolders.clear()  # compiled catalogues: read through msgunfmt, below
                continue
            for name in names:
                fmt = _SUFFIXES.get(Path(name.removesuffix(".gz")).suffix.lower())
                if fmt is None or (name.endswith(".gz") and fmt in _ZIPPED):
                    continue
                path = Path(folder, name)
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                if path.is_file() and (MIN_BYTES if fmt != "srt" else 0) <= size <= MAX_BYTES:
                    found.setdefault(fmt, []).append(path)
    return {fmt: sorted(set(paths)) for fmt, paths in found.items()}


def _package_of(path: Path) -> str:
    """The package a documentation file belongs to (its folder under ``/usr/share/doc``), else its folder."""
    if path.is_relative_to(DOC_ROOT):
        return path.relative_to(DOC_ROOT).parts[0]
    return str(path.parent)


def _one_per_package(paths: Sequence[Path]) -> list[Path]:
    """The first file of each package, packages in name order: many projects' styles before many of one."""
    first: dict[str, Path] = {}
    for path in paths:
        first.setdefault(_package_of(path), path)
    return [first[package] for package in sorted(first)]


def _spread(items: Sequence[_T], cap: int) -> list[_T]:
    """At most ``cap`` of ``items``, evenly spaced from the first, in their order."""
    if len(items) <= cap:
        return list(items)
    return [items[index * len(items) // cap] for index in range(cap)]


def _read_text(path: Path) -> str | None:
    """A file's text (gunzipped if it ends in ``.gz``), or ``None`` when it is not UTF-8 or too large."""
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    encoding = next((encoding for bom, encoding in _BOMS if data.startswith(bom)), None)
    if encoding is not None:  # a subtitle in UTF-16 or UTF-32: dragoman takes UTF-8
        try:
            data = data.decode(encoding).encode()
        except UnicodeDecodeError:
            return None
    if len(data) > MAX_BYTES:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _texts(fmt: str, paths: Sequence[Path]) -> list[CorpusDocument]:
    """Up to ``CAP[fmt]`` of ``paths`` spread evenly, those readable as UTF-8 and unlike each other."""
    texts: dict[str, Path] = {}
    for path in paths:
        text = _read_text(path)
        if text is not None and text.strip() and text not in texts:  # one subtitle in five encodings is one
            texts[text] = path
    return [CorpusDocument(fmt, path, str(path), text) for text, path in _spread(list(texts.items()), CAP[fmt])]


def _json_files() -> list[Path]:
    """The ISO code databases, then API descriptions (botocore's service models), within the size cap."""
    iso = sorted(ISO_CODES_JSON.glob("*.json")) if ISO_CODES_JSON.is_dir() else []
    iso = [p for p in iso if p.stat().st_size <= MAX_BYTES]
    services: list[Path] = []
    for root in _roots():
        services += root.glob("**/botocore/data/*/*/service-2.json*")
    services = sorted(p for p in set(services) if p.stat().st_size <= MAX_BYTES // 4)  # gzip'd: 4x bigger
    half = CAP["json"] // 2
    return iso[:half] + _spread(services, CAP["json"] - min(half, len(iso)))


def _catalogues(po_files: Sequence[Path]) -> list[CorpusDocument]:
    """Catalogues: ``.mo`` files spread across domains and languages, decompiled; templates; real ``.po``."""
    documents: list[CorpusDocument] = []
    msgunfmt = shutil.which("msgunfmt")
    if msgunfmt is not None:
        picked = _mo_sample()
        for index, path in enumerate(picked):
            text = _decompiled(msgunfmt, path)
            if text is None or "\nmsgid " not in text:  # no message but the header
                continue
            documents.append(CorpusDocument("po", path, f"{path} (msgunfmt)", text, retranslate=True))
            if index < POT_CAP:
                documents.append(CorpusDocument("po", path, f"{path} (msgunfmt, msgstr emptied)", as_template(text)))
    documents += _texts("po", po_files)[:2]
    return documents


def _mo_sample() -> list[Path]:
    """At most ``CAP["po"]`` compiled catalogues: domains spread in name order, languages in rotation."""
    by_domain: dict[str, dict[str, Path]] = {}
    for path in sorted(LOCALE_ROOT.glob("*/LC_MESSAGES/*.mo")):
        if path.stat().st_size <= MAX_MO_BYTES:
            by_domain.setdefault(path.stem, {})[path.parts[-3]] = path
    picked: list[Path] = []
    for index, domain in enumerate(_spread(sorted(by_domain), CAP["po"])):
        languages = by_domain[domain]
        wanted = [LANGUAGES[(index + shift) % len(LANGUAGES)] for shift in range(len(LANGUAGES))]
        language = next((lang for lang in wanted if lang in languages), min(languages))
        picked.append(languages[language])
    return picked


def _decompiled(msgunfmt: str, path: Path) -> str | None:
    """A ``.mo`` file as the ``.po`` text ``msgunfmt`` writes (``None`` if it cannot)."""
    result = subprocess.run([msgunfmt, str(path)], capture_output=True, check=False, timeout=60)
    if result.returncode != 0:
        return None
    try:
        return result.stdout.decode()
    except UnicodeDecodeError:
        return None


def as_template(catalogue: str) -> str:
    """A decompiled catalogue as a template (``.pot``): every ``msgstr`` but the header's emptied.

    The header's ``Language`` is emptied and its ``Plural-Forms`` are ``xgettext``'s placeholder,
    as in a template a project ships.
    """
    header_end = catalogue.find("\n\n")
    head, body = catalogue[: header_end + 1], catalogue[header_end + 1 :]
    head = _LANGUAGE.sub(r'\1"Language: \\n"', head)
    head = _PLURAL_FORMS.sub(r'\1"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n"', head)
    return head + _MSGSTR.sub(lambda match: f'{match.group(1)} ""\n', body)
