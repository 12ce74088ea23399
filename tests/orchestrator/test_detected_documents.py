"""Documents sent with ``source_lang="auto"``: detected once from their text when split, recorded, queued with it.

Identity worker, real Redis and PostgreSQL, the RQ tasks in-process (as test_runs_and_documents).
"""

from __future__ import annotations

from typing import Any

import pytest

from contract.settings import Settings
from producer.client import Client
from tests.orchestrator.test_runs_and_documents import orchestrate_until, run_orchestrator
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)

ENGLISH = (
    "# Save\n\n"
    "The orchestrator cuts every document into segments before any of them reaches a worker. "
    "Each segment is translated on its own, with the text before it as context, and the document "
    "is put together again once the last one has finished.\n\n"
    "- Ok\n"
    "- Cancel\n"
)
"""English, with a heading and list items ("Save", "Ok") that py3langid cannot tell on their own."""

FRENCH = (
    "Le chat dort sur le canapé depuis ce matin, et personne dans la maison ne veut le réveiller. "
    "Il faudra pourtant bien lui donner à manger avant que la nuit tombe sur le jardin.\n"
)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The RQ tasks read their settings from the environment, as in the rq-worker process."""


def _segment_languages(pg: Any, document_id: str) -> set[tuple[str, str | None]]:
    rows = pg.execute("SELECT source_lang, detected_source_lang FROM jobs WHERE document_id = %s", (document_id,))
    return {(row[0], row[1]) for row in rows}


def _stored_languages(pg: Any, document_id: str) -> tuple[str, str | None]:
    row = pg.execute("SELECT source_lang, detected_source_lang FROM documents WHERE id = %s", (document_id,))
    source, detected = row.fetchone()
    return source, detected


@pytest.mark.parametrize("source_lang", ["auto", None, "AUTO"])
async def test_auto_document_is_detected_from_its_whole_text(
    start_worker: WorkerFactory, client: Client, pg: Any, source_lang: str | None
) -> None:
    document_id = client.submit_document(ENGLISH, "md", source_lang, "fr")
    assert client.get_document(document_id).detected_source_lang is None  # not split yet
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(
            lambda: client.get_document(document_id).status == "completed", "the document completed"
        )
    progress = client.get_document(document_id)
    assert progress.detected_source_lang == "en"
    assert progress.to_dict()["detected_source_lang"] == "en"  # --json and webhooks
    assert _stored_languages(pg, document_id) == ("auto", "en")  # the document keeps "auto", as a job does
    # Every segment went with the document's language, "Save" and "Ok" too (alone they are not detected).
    assert _segment_languages(pg, document_id) == {("en", None)}
    assert progress.counts.succeeded == progress.counts.total == 4
    assert client.document_result(document_id).text == ENGLISH


async def test_auto_document_in_the_target_language_is_translated_as_a_job_is(
    start_worker: WorkerFactory, client: Client, pg: Any
) -> None:
    """A job with ``auto`` whose text is in its target language is translated all the same (fr -> fr)."""
    document_id = client.submit_document(FRENCH, "txt", "auto", "fr")
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(
            lambda: client.get_document(document_id).status == "completed", "the document completed"
        )
    assert client.get_document(document_id).detected_source_lang == "fr"
    assert _segment_languages(pg, document_id) == {("fr", None)}
    assert client.document_result(document_id).text == FRENCH


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("OK\n", "too little text to tell its language (2 letters; detection needs 20)"),
        (
            "The quick brown fox jumps over the lazy dog.\nLe renard brun saute par-dessus le chien.\n"
            "Der schnelle braune Fuchs springt über den faulen Hund.\n",
            "the document's language could not be told with confidence",
        ),
    ],
    ids=["too-short", "mixed"],
)
def test_undetectable_document_fails_saying_to_name_its_language(
    client: Client, pg: Any, source: str, reason: str
) -> None:
    document_id = client.submit_document(source, "txt", "auto", "de")
    run_orchestrator()  # split: detection fails before any segment is queued
    progress = client.get_document(document_id)
    assert progress.status == "failed" and progress.error is not None
    assert reason in progress.error
    assert "--from LANG" in progress.error and "source_lang=LANG" in progress.error
    assert progress.detected_source_lang is None
    assert pg.execute("SELECT count(*) FROM jobs WHERE document_id = %s", (document_id,)).fetchone()[0] == 0


def test_auto_document_without_segments_needs_no_detection(client: Client) -> None:
    document_id = client.submit_document('{"count": 3, "enabled": true}\n', "json", "auto", "fr")
    run_orchestrator()
    progress = client.get_document(document_id)
    assert (progress.status, progress.detected_source_lang, progress.counts.total) == ("completed", None, 0)


def test_named_source_language_is_not_detected(client: Client, pg: Any) -> None:
    document_id = client.submit_document(FRENCH, "txt", "en", "de")  # named (wrongly): taken as given
    run_orchestrator()
    assert client.get_document(document_id).detected_source_lang is None
    assert _stored_languages(pg, document_id) == ("en", None)


def test_detection_unavailable_fails_the_document_with_the_fix(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """An orchestrator installed without py3langid (the base install) says what to install, or what to pass."""
    import orchestrator.tasks

    class Missing(orchestrator.tasks.LanguageDetector):
        async def ready(self) -> None:
            raise ModuleNotFoundError("No module named 'py3langid'")

    monkeypatch.setattr(orchestrator.tasks, "_DETECTOR", Missing())
    document_id = client.submit_document(FRENCH, "txt", "auto", "de")
    run_orchestrator()
    progress = client.get_document(document_id)
    assert progress.status == "failed" and progress.error is not None
    assert "No module named 'py3langid'" in progress.error
    assert "dragoman[api]" in progress.error and "--from LANG" in progress.error
