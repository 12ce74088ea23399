"""XLIFF 1.2 and 2.0: each ``<source>`` without a translation gets a ``<target>``; everything else is kept.

The file must be well-formed XML whose root is ``xliff`` (no DOCTYPE: entity expansion is
never run). In 1.2 the unit is ``<trans-unit>``, in 2.0 ``<segment>``. A unit whose target is
missing, empty (``<target/>``) or blank is translated: the source's inline codes (``<g>``/``<pc>``
around text as paired tags; ``<x/>``, ``<ph/>``, ``<bx/>``, ``<ex/>``, ``<sc/>``, ``<ec/>`` and
native-code elements such as ``<bpt>…</bpt>`` as unit tags) come back in the target, and the
state is set: ``state="translated"`` on the 1.2 ``<target>``, on the 2.0 ``<segment>``. A unit
with ``translate="no"`` or a target with text is left as it is. The file's target language
(``target-language`` in 1.2, ``trgLang`` in 2.0) names the target once translated.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from typing import NamedTuple

from contract.errors import InvalidJobError
from orchestrator.segmenting.inline_block import segment_of
from orchestrator.segmenting.message_codes import with_message_codes
from orchestrator.segmenting.parts import Code, LangAttribute
from orchestrator.segmenting.skeleton import Skeleton

_TAG = re.compile(r"<(/?)([A-Za-z_][\w.:-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*?)(/?)>")
_PAIRED_CODES = frozenset({"g", "pc", "mrk", "sub"})
_NATIVE_CODES = frozenset({"bpt", "ept", "ph", "it"})  # elements whose content is native code (1.2)
_STATE = re.compile(r"""\sstate\s*=\s*("[^"]*"|'[^']*')""")
_SPACE = re.compile(r"""\sxml:space\s*=\s*("[^"]*"|'[^']*')""")
_XML_WHITESPACE = " \t\r\n"
_SIGNIFICANT_SPACE = re.compile(r"((?! )[ \t\r\n]+| [ \t\r\n]+)")
_TARGET_LANG = re.compile(r"""\s(target-language|trgLang)\s*=\s*("[^"]*"|'[^']*')""")


class _Unit(NamedTuple):
    """A translation unit's parts, as spans of the source."""

    start_tag: tuple[int, int]  # the <trans-unit> or <segment> start tag
    source: tuple[int, int]  # the <source> element's content
    source_end: int  # just past </source>
    target: tuple[int, int] | None  # the whole <target> element, if there is one
    target_blank: bool


def split_xliff(source: str, max_chars: int, skeleton: Skeleton, *, retranslate: bool = False) -> None:
    """An XLIFF file: each untranslated source's target becomes a segment (with ``retranslate``, every one)."""
    version = _check(source)
    unit_name = "trans-unit" if version == "1.2" else "segment"
    preserved = _preserved_sources(source)
    position = 0
    for tag in _TAG.finditer(source):
        name = tag.group(2).split(":")[-1]
        if (name, version) in (("xliff", "2.0"), ("file", "1.2")) and not tag.group(1):
            position = _target_language(skeleton, source, position, tag)
        if name != unit_name or tag.group(1) or tag.group(4) or tag.start() < position:
            continue
        unit = _unit(source, tag, unit_name)
        if unit is None or _no_translate(tag.group(0)):
            continue
        if unit.target is not None and not unit.target_blank and not retranslate:
            continue  # translated already
        position = _translate_unit(skeleton, source, position, unit, version, unit.source[0] in preserved)
    skeleton.literal(source[position:])


def _check(source: str) -> str:
    """The XLIFF version of a well-formed file (a clear error for anything else)."""
    if "<!DOCTYPE" in source or "<!ENTITY" in source:
        raise InvalidJobError("this XLIFF file declares a DOCTYPE or entities; XLIFF needs neither: remove them")
    try:
        root = ElementTree.fromstring(source.encode())
    except ElementTree.ParseError as exc:
        raise InvalidJobError(f"this is not a well-formed XLIFF file: {exc}") from None
    if root.tag.split("}")[-1] != "xliff":
        raise InvalidJobError(f"this is not an XLIFF file: its root element is {root.tag.split('}')[-1]!r}")
    version = root.get("version", "")
    if version.startswith("1."):
        return "1.2"
    if version.startswith("2."):
        return "2.0"
    raise InvalidJobError(f"unsupported XLIFF version {version!r}; dragoman reads 1.2 and 2.0")


def _target_language(skeleton: Skeleton, source: str, position: int, tag: re.Match[str]) -> int:
    """The file's target-language value as a lang part (it names the target once translated)."""
    found = _TARGET_LANG.search(tag.group(0))
    if found is None:  # missing: added once translated (2.0 requires trgLang as soon as a target exists)
        if tag.group(4):
            return position  # an empty <file/>: nothing in it is translated
        end = tag.end() - 1
        name = "trgLang" if tag.group(2).split(":")[-1] == "xliff" else "target-language"
        skeleton.literal(source[position:end])
        skeleton.add_lang(LangAttribute("", template=f' {name}="{{}}"'))
        return end
    value_start = tag.start() + found.start(2) + 1
    value_end = tag.start() + found.end(2) - 1
    skeleton.literal(source[position:value_start])
    skeleton.add_lang(LangAttribute(source[value_start:value_end]))
    return value_end


def _unit(source: str, start: re.Match[str], unit_name: str) -> _Unit | None:
    """The spans of the unit opened by ``start`` (``None``: no source in it)."""
    close = source.find(f"</{start.group(2)}>", start.end())
    if close == -1:
        return None
    body = range(start.end(), close)
    source_open = _find_tag(source, "source", body.start, close)
    if source_open is None or source_open.group(4):
        return None
    source_close = source.find(f"</{source_open.group(2)}>", source_open.end(), close)
    if source_close == -1:
        return None
    source_end = source_close + len(source_open.group(2)) + 3
    target_open = _find_tag(source, "target", source_end, close)
    target: tuple[int, int] | None = None
    blank = True
    if target_open is not None:
        if target_open.group(4):
            target = (target_open.start(), target_open.end())
        else:
            target_close = source.find(f"</{target_open.group(2)}>", target_open.end(), close)
            if target_close == -1:
                return None
            target = (target_open.start(), target_close + len(target_open.group(2)) + 3)
            blank = not source[target_open.end() : target_close].strip()
    return _Unit((start.start(), start.end()), (source_open.end(), source_close), source_end, target, blank)


def _find_tag(source: str, name: str, start: int, end: int) -> re.Match[str] | None:
    """The first start tag of element ``name`` (any namespace prefix) in ``source[start:end]``."""
    for tag in _TAG.finditer(source, start, end):
        if not tag.group(1) and tag.group(2).split(":")[-1] == name:
            return tag
    return None


def _no_translate(start_tag: str) -> bool:
    return bool(re.search(r"""\stranslate\s*=\s*["']no["']""", start_tag))


def _translate_unit(skeleton: Skeleton, source: str, position: int, unit: _Unit, version: str, preserve: bool) -> int:
    """The unit's target as a segment (with its state); returns how far the source is written.

    ``preserve`` (``xml:space="preserve"``): the source's whitespace is the target's, exactly: its
    leading and trailing whitespace frames the translation, and a run of whitespace inside it that
    is not one space (a line break, a tab) is a unit tag.
    """
    content = source[unit.source[0] : unit.source[1]]
    leading = trailing = ""
    if preserve:
        stripped = content.strip(_XML_WHITESPACE)
        leading = content[: len(content) - len(content.lstrip(_XML_WHITESPACE))]
        trailing = content[len(leading) + len(stripped) :]
        content = stripped
    tokens = with_message_codes(_inline(content, preserve), markup=False)
    if version == "1.2":
        open_tag = '<target state="translated">'
        if unit.target is not None:
            open_tag = _with_state(_open_tag(source[unit.target[0] : unit.target[1]]), "translated")
    else:
        open_tag = "<target>"
        if unit.target is not None:
            open_tag = _open_tag(source[unit.target[0] : unit.target[1]])
    if unit.target is not None:
        raw_span = unit.target
        frame = (open_tag + leading, trailing + _close_of(open_tag))
    else:
        raw_span = (unit.source_end, unit.source_end)
        indent = _indent_before(source, unit.source[0])
        frame = (indent + open_tag + leading, trailing + "</target>")
    segment = segment_of(tokens, "html", raw=source[raw_span[0] : raw_span[1]], frame=frame)
    if segment is None:
        return position
    if version == "2.0":
        start, end = unit.start_tag
        skeleton.literal(source[position:start])
        skeleton.add_marked(source[start:end], _with_state(source[start:end], "translated"))
        position = end
    skeleton.literal(source[position : raw_span[0]])
    skeleton.add_segment(segment)
    return raw_span[1]


def _preserved_sources(source: str) -> set[int]:
    """Where each ``<source>`` whose whitespace is significant starts its content (``xml:space``, inherited)."""
    stack: list[tuple[str, bool]] = [("", False)]
    found: set[int] = set()
    for tag in _TAG.finditer(source):
        name = tag.group(2)
        if tag.group(1):  # an end tag: back to its element's parent
            while len(stack) > 1 and stack.pop()[0] != name:
                pass
            continue
        space = _SPACE.search(tag.group(3))
        preserve = stack[-1][1] if space is None else space.group(1)[1:-1] == "preserve"
        if preserve and name.split(":")[-1] == "source" and not tag.group(4):
            found.add(tag.end())
        if not tag.group(4):
            stack.append((name, preserve))
    return found


def _inline(content: str, preserve: bool = False) -> list[str | Code]:
    """A source's content as text and codes (paired ``g``/``pc``, units for the rest).

    With ``preserve``, whitespace other than a single space inside the text is a unit too.
    """
    if preserve:
        return [
            Code(token, "unit") if isinstance(token, str) and token.strip(_XML_WHITESPACE) == "" else token
            for token in _split_whitespace(_inline(content))
        ]
    out: list[str | Code] = []
    position = 0
    skip_until = -1
    for tag in _TAG.finditer(content):
        if tag.start() < skip_until:
            continue
        if tag.start() > position:
            out.append(content[position : tag.start()])
        closing, name, self_closing = bool(tag.group(1)), tag.group(2).split(":")[-1], bool(tag.group(4))
        if name in _NATIVE_CODES and not closing and not self_closing:
            end = content.find(f"</{tag.group(2)}>", tag.end())
            end = len(content) if end == -1 else end + len(tag.group(2)) + 3
            out.append(Code(content[tag.start() : end], "unit"))
            position = skip_until = end
            continue
        if name in _PAIRED_CODES and not self_closing:
            out.append(Code(tag.group(0), "close" if closing else "open", name))
        else:
            out.append(Code(tag.group(0), "unit"))
        position = tag.end()
    if position < len(content):
        out.append(content[position:])
    return out


def _split_whitespace(tokens: list[str | Code]) -> list[str | Code]:
    """``tokens`` with every text run cut around its whitespace runs that are not a single space."""
    out: list[str | Code] = []
    for token in tokens:
        if isinstance(token, str):
            out += [piece for piece in _SIGNIFICANT_SPACE.split(token) if piece]
        else:
            out.append(token)
    return out


def _open_tag(target_element: str) -> str:
    """The start tag of a ``<target>`` element, self-closing or not, as a start tag."""
    tag = _TAG.match(target_element)
    assert tag is not None
    return f"<{tag.group(2)}{tag.group(3)}>"


def _close_of(open_tag: str) -> str:
    tag = _TAG.match(open_tag)
    assert tag is not None
    return f"</{tag.group(2)}>"


def _with_state(start_tag: str, state: str) -> str:
    """``start_tag`` with its ``state`` attribute set to ``state`` (added if missing)."""
    if _STATE.search(start_tag):
        return _STATE.sub(f' state="{state}"', start_tag, count=1)
    end = -2 if start_tag.endswith("/>") else -1
    return f'{start_tag[:end]} state="{state}"{start_tag[end:]}'


def _indent_before(source: str, content_start: int) -> str:
    """The line break and indentation before the ``<source>`` tag whose content starts at ``content_start``."""
    tag_start = source.rfind("<", 0, content_start)
    line_start = source.rfind("\n", 0, tag_start)
    whitespace = source[line_start:tag_start] if line_start != -1 else ""
    return whitespace if not whitespace.strip() else ""
