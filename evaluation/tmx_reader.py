"""TMX: each ``<tu>`` holds one ``<tuv xml:lang=...><seg>`` per language; the pair is picked by language.

The source language is ``--from``, else the header's ``srclang`` (unless ``*all*``); the target is
``--to``, else the one other language the file holds (several: a clear error listing them).
Languages match by their normalised code and, failing that, by primary language (``en-US`` is ``en``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from contract.errors import UnsupportedLanguageError
from contract.languages import normalize_language
from evaluation.segments import EvaluationInputError, Segment
from evaluation.xml_files import children, descendants, local_name, parse_xml, plain_text

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def read_tmx(path: Path, source_lang: str | None, target_lang: str | None) -> list[Segment]:
    """The units of the TMX at ``path`` that hold both languages of the chosen pair, in file order."""
    root = parse_xml(path, "TMX")
    if local_name(root) != "tmx":
        raise EvaluationInputError(f"{path}: the root element is <{local_name(root)}>, not <tmx>")
    units = [(unit, _variants(path, unit)) for unit in descendants(root, "tu")]
    seen = sorted({lang for _, variants in units for lang in variants})
    header = next(iter(children(root, "header")), None)
    declared = header.get("srclang") if header is not None else None
    source = _pick(path, source_lang or (declared if declared and declared != "*all*" else None), seen, "--from")
    if source is None:
        raise EvaluationInputError(f"{path}: the header names no source language; pass --from (it holds {seen})")
    others = [lang for lang in seen if lang != source]
    target = _pick(path, target_lang, seen, "--to")
    if target is None:
        if len(others) != 1:
            raise EvaluationInputError(f"{path}: pass --to to pick the target language among {others}")
        target = others[0]
    segments: list[Segment] = []
    for index, (unit, variants) in enumerate(units, start=1):
        if variants.get(source, "").strip() and variants.get(target, "").strip():
            where = f"{path} tu {unit.get('tuid', index)}"
            segments.append(Segment(variants[source], variants[target], where, source, target))
    return segments


def _variants(path: Path, unit: ET.Element) -> dict[str, str]:
    """A unit's texts by normalised language."""
    found: dict[str, str] = {}
    for variant in children(unit, "tuv"):
        lang = variant.get(_XML_LANG) or variant.get("lang")
        segs = children(variant, "seg")
        if lang is None or len(segs) != 1:
            raise EvaluationInputError(
                f"{path}: tu {unit.get('tuid', '?')} has a <tuv> without xml:lang or without exactly one <seg>"
            )
        found[_normalized(path, lang)] = plain_text(segs[0])
    return found


def _pick(path: Path, wanted: str | None, seen: list[str], flag: str) -> str | None:
    """The language of the file that ``wanted`` names: the same code, else the only one with its primary language."""
    if wanted is None:
        return None
    code = _normalized(path, wanted)
    if code in seen:
        return code
    primary = [lang for lang in seen if lang.split("-")[0] == code.split("-")[0]]
    if len(primary) == 1:
        return primary[0]
    raise EvaluationInputError(f"{path}: {flag} {wanted} matches none of the file's languages {seen}")


def _normalized(path: Path, code: str) -> str:
    try:
        return normalize_language(code)
    except UnsupportedLanguageError as exc:
        raise EvaluationInputError(f"{path}: {exc}") from None
