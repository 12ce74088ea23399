"""A word in angle brackets is text where it is no markup of the format (issue 50).

GNU tools write ``<standard input>`` and ``<decompress>`` in their messages, and dpkg's German
translators ``<Standardeingabe>``: no HTML element has those names, so a catalogue's or a Markdown
file's translator translates them, where HTML's own tags (``<b>``) stay markup.
"""

from __future__ import annotations

from orchestrator.segmenting import split_document
from tests.msgfmt_check import assert_msgfmt_accepts
from worker.deterministic_engine import swap_case_outside_tags

# Messages as coreutils, gzip and dpkg catalogues carry them.
CATALOGUE = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

msgid "<standard input>"
msgstr ""

msgid "<decompress>"
msgstr ""

msgid "reading <standard input>: %s"
msgstr ""

msgid "Use <b>--force</b> to overwrite."
msgstr ""
"""


def _swapped(source: str, fmt: str) -> tuple[list[str], str]:
    skeleton = split_document(source, fmt, 400)
    sent = [segment.text for segment in skeleton.segments]
    return sent, skeleton.assemble([swap_case_outside_tags(text) for text in sent], "de")


def test_angle_bracket_words_in_a_catalogue_are_translated_and_html_stays_markup() -> None:
    sent, out = _swapped(CATALOGUE, "po")
    assert sent == [
        "<standard input>",
        "<decompress>",
        "reading <standard input>: <x1/>",
        "Use <x1>--force</x1> to overwrite.",
    ]
    assert 'msgid "<standard input>"\nmsgstr "<STANDARD INPUT>"' in out
    assert 'msgid "<decompress>"\nmsgstr "<DECOMPRESS>"' in out
    assert 'msgstr "READING <STANDARD INPUT>: %s"' in out
    assert 'msgstr "uSE <b>--FORCE</b> TO OVERWRITE."' in out
    assert_msgfmt_accepts(out)


def test_a_german_catalogue_word_in_angle_brackets_is_sent_to_the_model() -> None:
    source = CATALOGUE.replace('msgid "<decompress>"', 'msgid "<Standardeingabe>"')
    sent, _ = _swapped(source, "po")
    assert "<Standardeingabe>" in sent


def test_angle_bracket_words_in_markdown_and_plain_text_are_translated() -> None:
    markdown = "Reads from <standard input> when no file is given, as <b>cat</b> does.\n"
    sent, out = _swapped(markdown, "md")
    assert sent == ["Reads from <standard input> when no file is given, as <x1>cat</x1> does."]
    assert out == "rEADS FROM <STANDARD INPUT> WHEN NO FILE IS GIVEN, AS <b>CAT</b> DOES.\n"
    sent, out = _swapped("Reads from <standard input> when no file is given.\n", "txt")
    assert out == "rEADS FROM <STANDARD INPUT> WHEN NO FILE IS GIVEN.\n"
