"""The readers of ``dragoman eval``: each format's pairs and languages, and a clear error for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.readers import Selection, load_segments
from evaluation.segments import EvaluationInputError, Segment

PO = r"""# French translations for demo.
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Language: fr\n"
"Content-Type: text/plain; charset=UTF-8\n"

#: src/main.c:10
msgid "Good morning."
msgstr "Bonjour."

#, fuzzy
msgid "Unchecked guess."
msgstr "Supposition."

msgid "Not translated yet."
msgstr ""

msgctxt "menu"
msgid ""
"Open the "
"file."
msgstr ""
"Ouvrir le "
"fichier."

msgid "%d file"
msgid_plural "%d files"
msgstr[0] "%d fichier"
msgstr[1] "%d fichiers"

#~ msgid "Old message."
#~ msgstr "Ancien message."
msgid "Say \"hi\"\n"
msgstr "Dis « salut »\n"
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _pairs(segments: list[Segment]) -> list[tuple[str, str]]:
    return [(segment.source, segment.reference) for segment in segments]


def test_po_pairs_skip_header_fuzzy_empty_and_obsolete(tmp_path: Path) -> None:
    segments = load_segments([_write(tmp_path, "fr.po", PO)], source_lang="en")
    assert _pairs(segments) == [
        ("Good morning.", "Bonjour."),
        ("Open the file.", "Ouvrir le fichier."),
        ("%d file", "%d fichier"),
        ('Say "hi"\n', "Dis « salut »\n"),
    ]
    assert {(s.source_lang, s.target_lang) for s in segments} == {("en", "fr")}
    assert segments[0].origin.endswith("fr.po:9")


def test_po_needs_a_source_language_and_checks_the_target(tmp_path: Path) -> None:
    path = _write(tmp_path, "fr.po", PO)
    with pytest.raises(EvaluationInputError, match="does not say its source language; pass --from"):
        load_segments([path])
    with pytest.raises(EvaluationInputError, match="target language is fr, but --to says de"):
        load_segments([path], source_lang="en", target_lang="de")


def test_po_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.po", 'msgid "a"\nmsgstr "b"\nthis is not gettext\n')
    with pytest.raises(EvaluationInputError, match=r"bad\.po:3: not a gettext catalogue line"):
        load_segments([path], source_lang="en", target_lang="fr")


XLIFF_12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="app" source-language="en" target-language="de" datatype="plaintext">
    <body>
      <trans-unit id="1">
        <source>Hello <g id="b">world</g>.</source><target>Hallo <g id="b">Welt</g>.</target>
      </trans-unit>
      <trans-unit id="2"><source>No target yet.</source></trans-unit>
      <trans-unit id="3"><source>Bye.</source><target>Tschüss.</target></trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF_20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en" trgLang="es">
  <file id="f1">
    <unit id="u1">
      <segment id="s1"><source>One.</source><target>Uno.</target></segment>
      <segment id="s2"><source>Two.</source><target>Dos.</target></segment>
    </unit>
    <unit id="u2"><segment><source>Three.</source><target></target></segment></unit>
  </file>
</xliff>
"""


def test_xliff_12_and_20(tmp_path: Path) -> None:
    old = load_segments([_write(tmp_path, "a.xlf", XLIFF_12)])
    assert _pairs(old) == [("Hello world.", "Hallo Welt."), ("Bye.", "Tschüss.")]
    assert (old[0].source_lang, old[0].target_lang) == ("en", "de")
    assert old[1].origin.endswith("a.xlf trans-unit 3")
    new = load_segments([_write(tmp_path, "b.xliff", XLIFF_20)])
    assert _pairs(new) == [("One.", "Uno."), ("Two.", "Dos.")]
    assert (new[0].source_lang, new[0].target_lang) == ("en", "es")


def test_xliff_errors(tmp_path: Path) -> None:
    with pytest.raises(EvaluationInputError, match=r"broken\.xliff:3: not well-formed XML"):
        load_segments([_write(tmp_path, "broken.xliff", "<xliff version='1.2'>\n<file>\n")])
    with pytest.raises(EvaluationInputError, match=r"XLIFF version 3\.0"):
        load_segments([_write(tmp_path, "v3.xliff", "<xliff version='3.0'/>")])


TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
  <header srclang="en-US" creationtool="t" creationtoolversion="1" datatype="plaintext" segtype="sentence"
    adminlang="en" o-tmf="x"/>
  <body>
    <tu tuid="1">
      <tuv xml:lang="en-US"><seg>The cat sleeps.</seg></tuv>
      <tuv xml:lang="fr-FR"><seg>Le chat dort.</seg></tuv>
      <tuv xml:lang="de-DE"><seg>Die Katze schläft.</seg></tuv>
    </tu>
    <tu tuid="2">
      <tuv xml:lang="en-US"><seg>Only English.</seg></tuv>
      <tuv xml:lang="de-DE"><seg>Nur Deutsch.</seg></tuv>
    </tu>
  </body>
</tmx>
"""


def test_tmx_picks_the_pair_by_language(tmp_path: Path) -> None:
    path = _write(tmp_path, "memory.tmx", TMX)
    french = load_segments([path], target_lang="fr")
    assert _pairs(french) == [("The cat sleeps.", "Le chat dort.")]
    assert (french[0].source_lang, french[0].target_lang) == ("en-US", "fr-FR")
    german = load_segments([path], source_lang="en", target_lang="de-DE")
    assert _pairs(german) == [("The cat sleeps.", "Die Katze schläft."), ("Only English.", "Nur Deutsch.")]
    with pytest.raises(EvaluationInputError, match="pass --to to pick the target language"):
        load_segments([path])
    with pytest.raises(EvaluationInputError, match="--to it matches none of the file's languages"):
        load_segments([path], target_lang="it")


def test_aligned_text_files(tmp_path: Path) -> None:
    source = _write(tmp_path, "en.txt", "One.\n\nThree.\n")
    reference = _write(tmp_path, "fr.txt", "Un.\nDeux.\nTrois.\n")
    segments = load_segments([], source_file=source, reference_file=reference, source_lang="en", target_lang="fr")
    assert _pairs(segments) == [("One.", "Un."), ("Three.", "Trois.")]
    assert segments[1].origin.endswith("en.txt:3")
    short = _write(tmp_path, "short.txt", "Un.\n")
    with pytest.raises(EvaluationInputError, match=r"has 3 lines and --reference .* has 1"):
        load_segments([], source_file=source, reference_file=short, source_lang="en", target_lang="fr")
    with pytest.raises(EvaluationInputError, match="--source and --reference go together"):
        load_segments([], source_file=source, source_lang="en", target_lang="fr")


def test_jsonl_pairs_with_languages_per_line(tmp_path: Path) -> None:
    lines = [
        {"source": "Hello.", "reference": "Bonjour."},
        {"source": "Hello.", "reference": "Hallo.", "target_lang": "de"},
    ]
    path = _write(tmp_path, "pairs.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n\n")
    segments = load_segments([path], source_lang="en", target_lang="fr")
    assert [(s.reference, s.target_lang) for s in segments] == [("Bonjour.", "fr"), ("Hallo.", "de")]
    bad = _write(tmp_path, "bad.jsonl", '{"source": "a", "reference": "b"}\n{"source": "a"}\n')
    with pytest.raises(EvaluationInputError, match=r"bad\.jsonl:2: 'source' and 'reference' must be strings"):
        load_segments([bad], source_lang="en", target_lang="fr")
    broken = _write(tmp_path, "broken.jsonl", "{nope\n")
    with pytest.raises(EvaluationInputError, match=r"broken\.jsonl:1: not JSON"):
        load_segments([broken], source_lang="en", target_lang="fr")


def test_unknown_format_and_nothing_given(tmp_path: Path) -> None:
    with pytest.raises(EvaluationInputError, match=r"unknown format \.csv"):
        load_segments([_write(tmp_path, "a.csv", "x")], source_lang="en", target_lang="fr")
    with pytest.raises(EvaluationInputError, match="nothing to evaluate"):
        load_segments([])
    with pytest.raises(EvaluationInputError, match="cannot read the file"):
        load_segments([tmp_path / "missing.po"], source_lang="en")


def test_selection_per_file_keeps_file_order(tmp_path: Path) -> None:
    lines = [
        json.dumps({"source": f"Sentence {i}." + "x" * (i % 3) * 50, "reference": f"Phrase {i}."}) for i in range(40)
    ]
    path = _write(tmp_path, "many.jsonl", "\n".join(lines))
    first = load_segments([path, path], source_lang="en", target_lang="fr", selection=Selection(limit=3))
    assert [s.reference for s in first] == ["Phrase 0.", "Phrase 1.", "Phrase 2."] * 2
    sampled = load_segments([path], source_lang="en", target_lang="fr", selection=Selection(sample=10, seed=7))
    again = load_segments([path], source_lang="en", target_lang="fr", selection=Selection(sample=10, seed=7))
    numbers = [int(s.reference.split()[1].rstrip(".")) for s in sampled]
    assert len(numbers) == 10 and numbers == sorted(numbers) and sampled == again
    short = load_segments([path], source_lang="en", target_lang="fr", selection=Selection(max_chars=20))
    assert all(len(s.source) <= 20 for s in short) and len(short) == 14
