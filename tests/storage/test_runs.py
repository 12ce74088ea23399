"""The ``runs`` and ``documents`` tables: row locks, splitting and assembly bookkeeping, webhooks."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from contract.services import ServiceUrls
from storage import GroupStore, PostgresConnection
from storage.runs import LockedDocument, LockedGroup, SegmentRow

_SKELETON = [["Hello.", "Hello.", False], " ", ["World.", "World.", False]]


def _running_run(groups: GroupStore, total: int = 2, callback_url: str | None = "http://cb.example/") -> str:
    run_id = str(uuid.uuid4())
    groups.create_run(run_id, "en", "fr", total, "a run", callback_url)
    groups.run_submitted(run_id, total, done=True)
    return run_id


def _job_row(pg: Any, column: str, group_id: str, sequence: int, status: str, translation: str | None = None) -> None:
    pg.execute(
        f"INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error, created_at, "
        f"finished_at, {column}, sequence) VALUES (%s, %s, 'en', 'fr', 'x', %s, %s, now(), now(), %s, %s)",
        (str(uuid.uuid4()), status, translation, None if status == "succeeded" else "boom", group_id, sequence),
    )


def test_the_group_row_stays_locked_until_the_block_ends(groups: GroupStore, service_urls: ServiceUrls) -> None:
    run_id = _running_run(groups)
    with PostgresConnection(service_urls.database_url) as second:
        second.get().execute("SET lock_timeout = '200ms'")
        racer = GroupStore(second)
        with groups.locked_group("run", run_id) as group:
            assert group == LockedGroup("running", 2, "http://cb.example/")
            with pytest.raises(psycopg.errors.LockNotAvailable), racer.locked_group("run", run_id):
                pass
            assert groups.complete_run(run_id) == "completed"
        with racer.locked_group("run", run_id) as group:  # committed and released: the racer sees it finished
            assert group is not None and group.status == "completed"


def test_an_error_inside_the_lock_rolls_its_writes_back(groups: GroupStore) -> None:
    run_id = _running_run(groups)
    with pytest.raises(RuntimeError), groups.locked_group("run", run_id):
        groups.complete_run(run_id)
        raise RuntimeError("finisher crashed")
    progress = groups.progress("run", run_id)
    assert progress is not None and progress.status == "running" and progress.completed_at is None


def test_unknown_groups_lock_nothing(groups: GroupStore) -> None:
    with groups.locked_group("document", str(uuid.uuid4())) as group:
        assert group is None
    with groups.locked_document(str(uuid.uuid4())) as document:
        assert document is None
    assert groups.callback_url("run", str(uuid.uuid4())) is None


def test_a_run_counts_its_rows_and_finishes_cancelled_when_asked(groups: GroupStore, pg: Any) -> None:
    run_id = _running_run(groups, total=3)
    _job_row(pg, "run_id", run_id, 0, "succeeded", "un")
    _job_row(pg, "run_id", run_id, 1, "cancelled")
    assert groups.request_cancel("run", run_id) == 3
    with groups.locked_group("run", run_id):
        assert groups.count_job_rows("run", run_id) == 2
        assert groups.complete_run(run_id) == "cancelled"
    progress = groups.progress("run", run_id)
    assert progress is not None and progress.status == "cancelled" and progress.completed_at is not None


def test_a_document_is_split_then_assembled_from_its_rows_in_order(groups: GroupStore, pg: Any) -> None:
    doc = str(uuid.uuid4())
    groups.create_document(doc, "txt", "Hello. World.", "en", "fr", "letter", None, 100)
    with groups.locked_document(doc) as document:
        assert document == LockedDocument("splitting", "txt", "Hello. World.", "en", "fr", 100, None, False)
        groups.save_skeleton(doc, _SKELETON, 2)
        groups.document_running(doc)
    _job_row(pg, "document_id", doc, 1, "failed")
    _job_row(pg, "document_id", doc, 0, "succeeded", "Bonjour.")

    with groups.locked_group("document", doc) as group:
        assert group == LockedGroup("running", 2, None)
        assembly = groups.assembly_input(doc)
        assert assembly.skeleton == _SKELETON and assembly.cancel_requested is False and assembly.target_lang == "fr"
        assert assembly.segments == [
            SegmentRow(0, "succeeded", "Bonjour.", None),
            SegmentRow(1, "failed", None, "boom"),
        ]
        report = {"segments": 2, "with_tags": 0, "failed": 1}
        groups.save_assembly(doc, "Bonjour. World.", [{"segment": 1, "status": "failed"}], "failed", report)

    assert groups.document_output(doc) == (
        "failed",
        "Bonjour. World.",
        [{"segment": 1, "status": "failed"}],
        {"segments": 2, "with_tags": 0, "failed": 1},
    )
    row = pg.execute("SELECT assemblies, submitted_at IS NOT NULL FROM documents WHERE id = %s", (doc,)).fetchone()
    assert row == (1, True)


def test_a_document_cancelled_or_unsplittable_before_splitting_is_final(groups: GroupStore) -> None:
    cancelled, broken = str(uuid.uuid4()), str(uuid.uuid4())
    for doc in (cancelled, broken):
        groups.create_document(doc, "html", "<p>x</p>", "en", "fr", None, None, 100)
    assert groups.request_cancel("document", cancelled) == 0
    with groups.locked_document(cancelled) as document:
        assert document is not None and document.cancel_requested
        groups.cancel_unsplit_document(cancelled)
    with groups.locked_document(broken):
        groups.fail_document(broken, "not valid HTML")

    gone, failed = groups.progress("document", cancelled), groups.progress("document", broken)
    assert gone is not None and (gone.status, gone.counts.total) == ("cancelled", 0) and gone.completed_at
    assert failed is not None and (failed.status, failed.error) == ("failed", "not valid HTML") and failed.completed_at


def test_webhook_attempts_are_counted_and_a_give_up_is_final(groups: GroupStore, pg: Any) -> None:
    run_id = _running_run(groups, callback_url="https://hooks.example/run")
    assert groups.callback_url("run", run_id) == "https://hooks.example/run"
    groups.record_webhook_attempt("run", run_id, "retrying")
    groups.record_webhook_attempt("run", run_id, "retrying")
    assert pg.execute("SELECT webhook_status, webhook_attempts FROM runs WHERE id = %s", (run_id,)).fetchone() == (
        "retrying",
        2,
    )
    groups.webhook_gave_up("run", run_id)
    assert pg.execute("SELECT webhook_status, webhook_attempts FROM runs WHERE id = %s", (run_id,)).fetchone() == (
        "failed",
        2,
    )
