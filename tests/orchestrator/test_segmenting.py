"""Documents cut into segments: structure kept byte for byte, code and markup never translated."""

from __future__ import annotations

import pytest

from contract.errors import InvalidJobError
from contract.inline_tags import Tag, tokens
from orchestrator.segmenting import split_document
from orchestrator.segmenting.preceding import preceding_text

TRICKY_MARKDOWN = """---
title: Guide
tags: [a, b]
---
# Getting *started* #

Install it with `pip install dragoman` and read [the docs](https://example.com/docs "Docs").
A line with a hard break  
and ![a diagram](img/arch.png) plus <kbd>Ctrl</kbd> and https://example.com/x?y=1.

* First item
* [ ] An open task
    nested continuation
1) Numbered one
10. Numbered ten

> A quote with **bold** text.
> > Nested quote.

| Column | Other \\| pipe |
|:-------|--------------:|
| cell one | `code` cell |

```python
def greet(name):  # never translated
    return f"Hello {name}"
```

~~~
tilde fence: also code
~~~

    indented code block
    second line

Title underlined
----------------

***

[ref]: https://example.com/ref
Trailing text without newline"""

TRICKY_HTML = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Not translated</title>
<style>p > a { color: red; }</style></head>
<body>
  <!-- a comment with <b>tags</b> -->
  <h1 class="title" data-x='a > b'>Hello &amp; welcome</h1>
  <p>First paragraph with <a href="/x?a=1&amp;b=2" title="keep me">a link</a>, &nbsp; and&#39;s entities.</p>
  <pre>  code   keeps   spaces  </pre>
  <p>Line<br>break and <code>inline code</code> here.</p>
  <script>var s = "<p>not html</p>";</script>
  <textarea>user text</textarea>
  <img src="a.png" alt="an image"/>
</body>
</html>
"""

TRICKY_TEXT = (
    "First line.\n\n  Indented line with trailing spaces   \r\nThird line\n\n\n12345\n- dash\nno newline at end"
)


@pytest.mark.parametrize(("source", "fmt"), [(TRICKY_MARKDOWN, "md"), (TRICKY_HTML, "html"), (TRICKY_TEXT, "txt")])
def test_identity_round_trip_is_byte_for_byte(source: str, fmt: str) -> None:
    skeleton = split_document(source, fmt, 200)
    assert skeleton.segments
    assert skeleton.assemble([s.text for s in skeleton.segments]) == source
    assert skeleton.source() == source


def shout(text: str) -> str:
    """A stand-in translation: the text in capitals, placeholder tags as they were."""
    return "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tokens(text))


def _translated(source: str, fmt: str) -> tuple[str, list[str]]:
    skeleton = split_document(source, fmt, 200)
    texts = [s.text for s in skeleton.segments]
    return skeleton.assemble([shout(t) for t in texts], "fr"), texts


def test_markdown_code_urls_and_syntax_are_never_translated() -> None:
    out, texts = _translated(TRICKY_MARKDOWN, "md")
    for kept in (
        "`pip install dragoman`",
        '(https://example.com/docs "Docs")',
        "](img/arch.png)",
        "<kbd>",
        "</kbd>",
        "https://example.com/x?y=1.",
        "def greet(name):  # never translated",
        '    return f"Hello {name}"',
        "tilde fence: also code",
        "    indented code block",
        "[ref]: https://example.com/ref",
        "title: Guide",
        "|:-------|--------------:|",
        "* [ ] ",
        "1) ",
        "> > ",
    ):
        assert kept in out, kept
    assert "# GETTING *STARTED* #" in out
    assert "[THE DOCS](https://example.com/docs" in out
    assert "![A DIAGRAM](img/arch.png)" in out  # alt text translated, target kept
    assert "| CELL ONE | `code` CELL |" in out
    assert "TITLE UNDERLINED\n----------------" in out
    assert "TRAILING TEXT WITHOUT NEWLINE" in out
    assert not any("```" in t or "http" in t or "pip install" in t for t in texts)


def test_markdown_sentences_stay_whole_across_inline_markup_and_wrapped_lines() -> None:
    _, texts = _translated(TRICKY_MARKDOWN, "md")
    assert "Getting <x1>started</x1>" in texts
    assert (  # the hard break (two spaces before the line end) is a line break the translation keeps
        "Install it with <x1/> and read <x2>the docs</x2>. A line with a hard break<x3/>and <x4>a diagram</x4> plus "
        "<x5>Ctrl</x5> and <x6/>." in texts
    )
    assert "A quote with <x1>bold</x1> text." in texts


def test_html_translates_whole_sentences_attributes_and_sets_lang() -> None:
    out, texts = _translated(TRICKY_HTML, "html")
    assert '<html lang="fr">' in out
    assert "<h1 class=\"title\" data-x='a > b'>HELLO &amp; WELCOME</h1>" in out
    assert '<a href="/x?a=1&amp;b=2" title="KEEP ME">A LINK</a>' in out
    assert "<title>NOT TRANSLATED</title>" in out
    assert 'alt="AN IMAGE"' in out
    for kept in (
        "p > a { color: red; }",
        "<!-- a comment with <b>tags</b> -->",
        "<pre>  code   keeps   spaces  </pre>",
        "<code>inline code</code>",
        'var s = "<p>not html</p>";',
        "<textarea>user text</textarea>",
    ):
        assert kept in out, kept
    assert "Hello & welcome" in texts  # the model sees text, not entities
    assert "First paragraph with <x1>a link</x1>, \xa0 and's entities." in texts
    assert "Line<x1/>break and <x2/> here." in texts


def test_long_prose_is_cut_at_sentence_ends() -> None:
    sentences = [f"Sentence number {i} talks about the weather in the mountains." for i in range(40)]
    paragraph = " ".join(sentences)
    skeleton = split_document(paragraph + "\n", "txt", 200)
    assert all(len(s.text) <= 200 for s in skeleton.segments)
    assert all(s.text.endswith(".") for s in skeleton.segments)
    assert skeleton.source() == paragraph + "\n"
    one_word = "x" * 500
    assert all(len(s.text) <= 200 for s in split_document(one_word, "txt", 200).segments)


def test_unsupported_format_and_silly_limits_are_clear_errors() -> None:
    with pytest.raises(InvalidJobError, match="use one of txt, md, html"):
        split_document("hello", "pages", 200)
    with pytest.raises(InvalidJobError, match="at least 20"):
        split_document("hello", "txt", 5)


def test_each_segment_is_sent_with_the_text_before_it_as_context() -> None:
    skeleton = split_document("First sentence here.\n\nSecond <b>bold</b> one.\n\nThird.\n", "md", 200)
    segments = skeleton.segments
    assert [preceding_text(segments, i, 300) for i in range(3)] == [
        None,
        "First sentence here.",
        "First sentence here. Second bold one.",  # tags left out: context is read, not translated
    ]
    assert preceding_text(segments, 2, 12) == "bold one."  # bounded, starting at a whole word
    assert preceding_text(segments, 2, 0) is None
