"""Parsing the XML formats (XLIFF, TMX) with errors that name the file and line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from evaluation.segments import EvaluationInputError


def parse_xml(path: Path, what: str) -> ET.Element:
    """The root element of the XML file at ``path`` (``what`` names the format expected, for the error).

    Python's parser expands no external entities, so a file cannot make it read others.
    """
    try:
        return ET.parse(path).getroot()
    except OSError as exc:
        raise EvaluationInputError(f"{path}: cannot read the file ({exc.strerror})") from None
    except ET.ParseError as exc:
        line, column = exc.position
        raise EvaluationInputError(f"{path}:{line}: not well-formed XML (column {column}), so not {what}") from None


def local_name(element: ET.Element) -> str:
    """An element's tag without its namespace (``{urn:...}source`` -> ``source``)."""
    return element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""


def children(element: ET.Element, name: str) -> list[ET.Element]:
    """The direct children named ``name`` (any namespace)."""
    return [child for child in element if local_name(child) == name]


def descendants(element: ET.Element, name: str) -> list[ET.Element]:
    """Every element below ``element`` named ``name`` (any namespace), in document order."""
    return [found for found in element.iter() if found is not element and local_name(found) == name]


def plain_text(element: ET.Element) -> str:
    """The element's text with inline markup (``<g>``, ``<ph>``, ``<pc>``) flattened to the text it holds."""
    return "".join(element.itertext())
