"""XLIFF 1.2 and 2.0: each source with a non-empty target is a pair; the languages come from the file.

1.2: ``<file source-language= target-language=>`` holding ``<trans-unit><source/><target/>``.
2.0: ``<xliff srcLang= trgLang=>`` holding ``<unit><segment><source/><target/>`` (every segment is a pair).
Inline markup is flattened to its text (the model sees what a reader sees).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from evaluation.segments import EvaluationInputError, Segment
from evaluation.xml_files import children, descendants, local_name, parse_xml, plain_text


def read_xliff(path: Path) -> list[Segment]:
    """The translated units of the XLIFF file at ``path``, in file order."""
    root = parse_xml(path, "XLIFF")
    if local_name(root) != "xliff":
        raise EvaluationInputError(f"{path}: the root element is <{local_name(root)}>, not <xliff>")
    version = root.get("version", "")
    if version.startswith("1."):
        return _read_1(path, root)
    if version.startswith("2."):
        return _read_2(path, root)
    raise EvaluationInputError(f"{path}: XLIFF version {version or '(none)'}; 1.2 and 2.0 are read")


def _read_1(path: Path, root: ET.Element) -> list[Segment]:
    segments: list[Segment] = []
    for file in children(root, "file"):
        source_lang, target_lang = file.get("source-language"), file.get("target-language")
        for unit in descendants(file, "trans-unit"):
            segments.extend(_pair(path, f"trans-unit {unit.get('id', '?')}", unit, source_lang, target_lang))
    return segments


def _read_2(path: Path, root: ET.Element) -> list[Segment]:
    source_lang, target_lang = root.get("srcLang"), root.get("trgLang")
    segments: list[Segment] = []
    for unit in descendants(root, "unit"):
        for index, segment in enumerate(children(unit, "segment"), start=1):
            where = f"unit {unit.get('id', '?')} segment {segment.get('id', index)}"
            segments.extend(_pair(path, where, segment, source_lang, target_lang))
    return segments


def _pair(
    path: Path, where: str, holder: ET.Element, source_lang: str | None, target_lang: str | None
) -> list[Segment]:
    """The unit's pair, or nothing when it has no translation yet."""
    sources, targets = children(holder, "source"), children(holder, "target")
    if len(sources) != 1:
        raise EvaluationInputError(f"{path}: {where} has {len(sources)} <source> elements, not one")
    source, target = plain_text(sources[0]), plain_text(targets[0]) if targets else ""
    if not source.strip() or not target.strip():
        return []
    return [Segment(source, target, f"{path} {where}", source_lang, target_lang)]
