"""HTML's ``<tt>`` holds code, as ``<code>`` does: kept out of the model whole (issue 50).

Old GNU manuals (texinfo's HTML, Sphinx's older themes) write file names, commands and URLs in
``<tt>``; the model must never rewrite them.
"""

from __future__ import annotations

from orchestrator.segmenting import split_document
from worker.deterministic_engine import swap_case_outside_tags

# As texinfo's makeinfo writes a sentence of the wget manual.
SOURCE = '<p>Run <tt>wget --help</tt> or read <tt class="file">/etc/wgetrc</tt> for the Options.</p>\n'


def test_tt_content_is_a_unit_tag_and_comes_back_unchanged() -> None:
    skeleton = split_document(SOURCE, "html", 400)
    sent = [segment.text for segment in skeleton.segments]
    assert sent == ["Run <x1/> or read <x2/> for the Options."]
    out = skeleton.assemble([swap_case_outside_tags(text) for text in sent], "de")
    assert out == '<p>rUN <tt>wget --help</tt> OR READ <tt class="file">/etc/wgetrc</tt> FOR THE oPTIONS.</p>\n'
