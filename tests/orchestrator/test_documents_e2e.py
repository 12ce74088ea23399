"""Documents in every format through the real CPU engine: structure kept, prose translated, markup whole.

The default model (Gemma 3 270M) is small: the assertions hold what dragoman guarantees (every
segment translated or reported, markup, timings, keys and placeholders intact, the output
parses as its format), not the quality of its French.
"""

from __future__ import annotations

import base64
import io
import json
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from contract.documents import encode_document
from contract.services import ServiceUrls
from producer.client import Client
from tests.conftest import settings_for
from tests.msgfmt_check import assert_msgfmt_accepts
from tests.orchestrator.test_document_formats import JSON, PO, SRT, VTT, XLIFF_12, make_docx
from tests.orchestrator.test_runs_and_documents import orchestrate_until
from tests.worker.conftest import default_model_worker
from worker.vllm_engine import VllmEngine

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

HTML = '<html lang="en"><body><p>Click <a href="/docs">the guide</a> to <b>start</b> today.</p></body></html>'
MARKDOWN = "# Getting started\n\nRun `dragoman translate` to translate this file.\n"

DOCUMENTS = {
    "html": HTML,
    "md": MARKDOWN,
    "srt": SRT,
    "vtt": VTT,
    "po": PO,
    "json": JSON,
    "xliff": XLIFF_12,
    "docx": encode_document("docx", make_docx()),
}


@dataclass(frozen=True)
class DocumentRun:
    """The documents of ``DOCUMENTS``, translated: their ids and a client on their deployment."""

    client: Client
    ids: dict[str, str]
    """Format -> document id."""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def documents(
    default_engine: VllmEngine, service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[DocumentRun]:
    """Every document of ``DOCUMENTS`` submitted at once and translated by one worker on the shared engine.

    Together, their segments fill the engine's batch instead of each document paying its own worker and
    its own tail of single sequences; each test below then checks one format's outcome.
    """
    settings = settings_for(service_urls, tmp_path_factory.mktemp("documents") / "data")
    assert settings.redis_url and settings.database_url
    with pytest.MonkeyPatch.context() as env, Client(settings) as client:
        # The orchestrator's tasks read their settings from the environment, as in the rq-worker process.
        env.setenv("DRAGOMAN_REDIS_URL", settings.redis_url)
        env.setenv("DRAGOMAN_DATABASE_URL", settings.database_url)
        env.setenv("DRAGOMAN_KEY_PREFIX", settings.key_prefix)
        env.setenv("DRAGOMAN_DATA_DIR", str(settings.data_dir))
        ids = {fmt: client.submit_document(source, fmt, "en", "fr") for fmt, source in DOCUMENTS.items()}
        worker = default_model_worker(settings, service_urls, default_engine, max_in_flight=16)
        await worker.start()
        try:
            await orchestrate_until(
                lambda: all(client.get_document(i).status in ("completed", "failed") for i in ids.values()),
                "every document completed or failed",
            )
        finally:
            await worker.stop(grace_seconds=30)
        yield DocumentRun(client, ids)


def _kept(fmt: str, out: str) -> None:
    """What must survive translation in each format, whatever the model wrote."""
    if fmt == "html":
        assert '<html lang="fr">' in out and '<a href="/docs">' in out and "</a>" in out and "<b>" in out
    elif fmt == "md":
        assert out.startswith("# ") and "`dragoman translate`" in out and out.endswith("\n")
    elif fmt == "srt":
        assert "00:00:01,000 --> 00:00:04,000\r\n" in out and "<i>" in out and "{\\an8}" in out
    elif fmt == "vtt":
        assert out.startswith("WEBVTT - a test\n\nNOTE this is a note") and "00:00.000 --> 00:02.000 align:start" in out
    elif fmt == "po":
        assert 'msgstr "Déjà fait"' in out and re.search(r'msgstr "[^"]*%\(name\)s[^"]*\{count\}', out)
        assert re.search(r'msgstr\[1\] "[^"]*%d', out)
        assert_msgfmt_accepts(out)
    elif fmt == "xliff":
        ElementTree.fromstring(out.encode())
        assert out.count('<target state="translated">') == 3 and '<x id="2"/></target>' in out
        assert '<target state="final">Schon erledigt</target>' in out
    elif fmt == "docx":
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(out)))
        body = archive.read("word/document.xml").decode()
        ElementTree.fromstring(body)
        assert '<w:hyperlink r:id="rId9">' in body and "<w:tab/>" in body and "<w:b/>" in body
        assert archive.read("word/media/image1.png") == b"\x89PNG not really"
    elif fmt == "json":
        data = json.loads(out)["app"]
        assert data["url"] == "https://example.com/help" and "{name}" in data["greeting"]
        assert "{count, plural, =0 {" in data["files"] and "{folder}" in data["files"]


@pytest.mark.parametrize("fmt", list(DOCUMENTS))
def test_a_document_comes_back_translated_with_its_structure(documents: DocumentRun, pg: Any, fmt: str) -> None:
    source, document_id = DOCUMENTS[fmt], documents.ids[fmt]
    result = documents.client.document_result(document_id)
    assert result.status == "completed" and result.failed_segments == []
    rows = pg.execute(
        "SELECT source_text, translated_text, output_tokens FROM jobs WHERE document_id = %s", (document_id,)
    ).fetchall()
    assert rows and all(tokens for _, _, tokens in rows)  # the engine generated every segment
    if any(translated != text for text, translated, _ in rows):  # a small model may echo a short cue
        assert result.text != source  # what it translated is written back
    _kept(fmt, result.text)
    report = result.report
    assert report is not None and report["failed"] == 0
    assert report["tags_kept"] + len(report["retried"]) + len(report["fell_back"]) == report["with_tags"]
    assert report["tags_broken"] == []
