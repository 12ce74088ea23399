"""A door job's markup kept in its metadata, and its views with the client's markup back (issue 49)."""

from __future__ import annotations

from api.door_markup import MARKUP_KEY, as_sent, markup_metadata
from contract.schemas import Job, JobStatus
from markup.placeholders import HTML, to_placeholders


def test_a_tagged_job_is_shown_as_sent_and_its_metadata_as_the_client_gave_it() -> None:
    page = '<p>Read <a href="/x">this</a>, <b>now</b>.<br></p>'
    tagged = to_placeholders(page, HTML)
    assert tagged.text != page
    metadata = markup_metadata(tagged.markup)
    assert metadata is not None
    job = Job(
        id="j",
        status=JobStatus.SUCCEEDED,
        text=tagged.text,
        translation=tagged.text.upper(),
        metadata={**metadata, "custom_id": "7"},
    )
    shown = as_sent(job)
    assert shown.text == page
    assert shown.translation == tagged.restore(tagged.text.upper())
    assert shown.metadata == {"custom_id": "7"}


def test_markup_past_the_metadata_limit_is_not_kept_and_a_client_value_of_the_key_is_not_markup() -> None:
    assert markup_metadata({}) is None
    assert markup_metadata({f"<x{n}/>": "<br>" * 20 for n in range(1, 2_000)}) is None  # over 64 KiB of JSON
    job = Job(id="j", status=JobStatus.SUCCEEDED, text="<x1/>", translation="<x1/>", metadata={MARKUP_KEY: "mine"})
    shown = as_sent(job)
    assert (shown.text, shown.translation, shown.metadata) == ("<x1/>", "<x1/>", {})
