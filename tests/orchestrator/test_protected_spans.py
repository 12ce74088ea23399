"""URLs and e-mail addresses never reach the model, in any format (issue 50).

Each test splits a real-looking document, answers every segment as ``dragoman worker --engine echo
--echo-mode swapcase`` does (:func:`swap_case_outside_tags`: what reached the model comes back with
its case swapped), and assembles it: the address must come back byte for byte, the prose around it
swapped. The GNU phrases are those of wget's and coreutils' ``--help`` and their catalogues.
"""

from __future__ import annotations

import base64
import io
import json
import time
import zipfile

import pytest

from contract.documents import encode_document
from markup.protected_spans import protected_spans
from orchestrator.segmenting import split_document
from orchestrator.segmenting.split import finish_document
from tests.orchestrator.test_document_formats import make_docx
from tests.orchestrator.test_opendocument import make_odf
from worker.deterministic_engine import swap_case_outside_tags

URL = "https://www.gnu.org/licenses/gpl.html"
MAIL = "bug-wget@gnu.org"


def _swapped(source: str, fmt: str) -> tuple[list[str], str]:
    """What the model is sent, and the document assembled from the swapcase engine's answers."""
    skeleton = split_document(source, fmt, 400)
    sent = [segment.text for segment in skeleton.segments]
    return sent, skeleton.assemble([swap_case_outside_tags(text) for text in sent], "de")


def _assert_kept(sent: list[str], out: str, *kept: str) -> None:
    for address in kept:
        assert all(address not in text for text in sent), (address, sent)
        assert address in out, (address, out)
    assert "rEPORT BUGS TO" in out or "sEE" in out  # the prose around the address did reach the model


@pytest.mark.parametrize(
    ("fmt", "source"),
    [
        ("txt", f"Report bugs to {MAIL}.\nSee {URL}, or www.gnu.org/software/wget/ for more.\n"),
        ("html", f"<p>Report bugs to {MAIL}.</p><p>See {URL}, or www.gnu.org/software/wget/ for more.</p>"),
        (
            "html",
            f'<p title="See {URL} now">Report bugs to <a href="mailto:{MAIL}">{MAIL}</a>.</p>',
        ),
        ("json", json.dumps({"help": f"Report bugs to {MAIL}.", "more": f"See {URL} for the licence."})),
        (
            "srt",
            f"1\n00:00:01,000 --> 00:00:04,000\nReport bugs to {MAIL}.\n\n"
            f"2\n00:00:05,000 --> 00:00:07,000\nSee {URL}.\n",
        ),
        ("vtt", f"WEBVTT\n\n00:01.000 --> 00:04.000\nReport bugs to {MAIL}.\n\n00:05.000 --> 00:07.000\nSee {URL}.\n"),
        ("md", f"Report bugs to {MAIL} or <{MAIL}>.\n\nSee <{URL}> and www.gnu.org/software/wget/.\n"),
        (
            "po",
            f'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
            f'msgid "Report bugs to <{MAIL}>.\\n"\nmsgstr ""\n\n'
            f'msgid "See {URL} or https://example.org/a%20b?x=%s for more."\nmsgstr ""\n',
        ),
        (
            "xliff",
            '<?xml version="1.0"?><xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
            '<file source-language="en" target-language="de" datatype="plaintext" original="a"><body>'
            f'<trans-unit id="1"><source>Report bugs to {MAIL}.</source></trans-unit>'
            f'<trans-unit id="2"><source>See {URL} for more.</source></trans-unit></body></file></xliff>',
        ),
    ],
    ids=["txt", "html", "html-attribute-and-link", "json", "srt", "vtt", "markdown", "po", "xliff"],
)
def test_addresses_in_running_text_come_back_unchanged_and_the_prose_swapped(fmt: str, source: str) -> None:
    sent, out = _swapped(source, fmt)
    _assert_kept(sent, out, MAIL, URL)
    if "www.gnu.org/software/wget/" in source:
        _assert_kept(sent, out, "www.gnu.org/software/wget/")
    if "a%20b?x=%s" in source:  # a URL is one unit whole: a %20 or %s in it is no placeholder
        _assert_kept(sent, out, "https://example.org/a%20b?x=%s")


def _zipped_member(document: str, name: str) -> str:
    return zipfile.ZipFile(io.BytesIO(base64.b64decode(document))).read(name).decode()


def test_a_docx_paragraph_of_one_run_keeps_its_addresses() -> None:
    body = f"<w:p><w:r><w:t>Report bugs to {MAIL}. See {URL}.</w:t></w:r></w:p>"
    source = encode_document("docx", make_docx(body))
    sent, out = _swapped(source, "docx")
    xml = _zipped_member(finish_document("docx", out), "word/document.xml")
    _assert_kept(sent, xml, MAIL, URL)


def test_an_odt_paragraph_keeps_its_addresses() -> None:
    body = f'<text:p text:style-name="Standard">Report bugs to {MAIL}. See <text:span>{URL}</text:span>.</text:p>'
    source = encode_document("odt", make_odf("text", body))
    sent, out = _swapped(source, "odt")
    xml = _zipped_member(finish_document("odt", out), "content.xml")
    _assert_kept(sent, xml, MAIL, URL)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("See https://www.gnu.org/licenses/.", ["https://www.gnu.org/licenses/"]),
        (
            "(see https://en.wikipedia.org/wiki/Fork_(software)), then",
            ["https://en.wikipedia.org/wiki/Fork_(software)"],
        ),
        ("Mail <bug-wget@gnu.org>, or mailto:info@gnu.org.", ["<bug-wget@gnu.org>", "mailto:info@gnu.org"]),
        (
            "&lt;https://a.example/?x=1&amp;y=2&gt; and www.example.org;",
            ["&lt;https://a.example/?x=1&amp;y=2&gt;", "www.example.org"],
        ),
        ("file:///usr/share/doc/README here", ["file:///usr/share/doc/README"]),
        ("user@localhost, 50% @ noon, a.b@c, foo://", []),
    ],
)
def test_where_an_address_ends_follows_the_linkifiers(text: str, found: list[str]) -> None:
    assert [text[start:end] for start, end in protected_spans(text)] == found


@pytest.mark.parametrize(
    "hostile",
    ["a" * 200_000 + "@", "://" * 70_000, "www." * 50_000, "a@" * 100_000, "http://x" + ")" * 200_000, "&a;" * 70_000],
)
def test_finding_addresses_takes_linear_time(hostile: str) -> None:
    started = time.perf_counter()
    protected_spans(hostile)
    assert time.perf_counter() - started < 5  # quadratic would be minutes
