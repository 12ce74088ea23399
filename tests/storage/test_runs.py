"""The ``runs`` and ``documents`` tables: row locks, splitting and assembly bookkeeping, webhooks."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from contract.services import ServiceUrls
from storage import AsyncConnectionPool, DatabaseUnavailableError, GroupStore
from storage.runs import LockedDocument, LockedGroup, SegmentRow

_SKELETON = [["Hello.", "Hello.", False], " ", ["World.", "World.", False]]


async def _running_run(groups: GroupStore, total: int = 2, callback_url: str | None = "http://cb.example/") -> str:
    run_id = str(uuid.uuid4())
    await groups.create_run(run_id, "en", "fr", total, "a run", callback_url)
    await groups.run_submitted(run_id, total, done=True)
    return run_id


def _job_row(pg: Any, column: str, group_id: str, sequence: int, status: str, translation: str | None = None) -> None:
    pg.execute(
        f"INSERT INTO jobs (id, status, source_lang, target_lang, source_text, translated_text, error, created_at, "
        f"finished_at, {column}, sequence, created_day) VALUES (%s, %s, 'en', 'fr', 'x', %s, %s, now(), now(), %s, %s, "
        "(now() AT TIME ZONE 'UTC')::date)",
        (str(uuid.uuid4()), status, translation, None if status == "succeeded" else "boom", group_id, sequence),
    )


async def test_the_group_row_stays_locked_until_the_block_ends(groups: GroupStore, service_urls: ServiceUrls) -> None:
    run_id = await _running_run(groups)
    second = AsyncConnectionPool(service_urls.database_url, max_connections=1)  # its one connection waits 200 ms
    try:
        async with second.connection() as conn:
            await conn.execute("SET lock_timeout = '200ms'")
        racer = GroupStore(second)
        async with groups.locked_group("run", run_id) as group:
            assert group == LockedGroup("running", 2, "http://cb.example/")
            with pytest.raises(DatabaseUnavailableError, match="lock timeout"):  # the pool's word for it
                async with racer.locked_group("run", run_id):
                    pass
            assert await groups.complete_run(run_id) == "completed"
        async with racer.locked_group("run", run_id) as group:  # committed and released: the racer sees it finished
            assert group is not None and group.status == "completed"
    finally:
        await second.close()


async def test_an_error_inside_the_lock_rolls_its_writes_back(groups: GroupStore) -> None:
    run_id = await _running_run(groups)
    with pytest.raises(RuntimeError):
        async with groups.locked_group("run", run_id):
            await groups.complete_run(run_id)
            raise RuntimeError("finisher crashed")
    progress = await groups.progress("run", run_id)
    assert progress is not None and progress.status == "running" and progress.completed_at is None


async def test_lookups_scoped_to_a_tenant_see_only_its_groups(groups: GroupStore) -> None:
    run_id, doc = str(uuid.uuid4()), str(uuid.uuid4())
    await groups.create_run(run_id, "en", "fr", 2, "a run", None, tenant="acme")
    await groups.create_document(doc, "txt", "Hello.", "en", "fr", None, None, 100, tenant="acme")
    for kind, group_id in (("run", run_id), ("document", doc)):
        assert await groups.progress(kind, group_id, "other") is None  # another tenant's: as if unknown
        assert await groups.request_cancel(kind, group_id, "other") is None
        found = await groups.progress(kind, group_id, "acme")
        assert found is not None and found.id == group_id
        assert await groups.progress(kind, group_id) is not None  # unscoped: the client and the orchestrator
    assert await groups.document_output(doc, "other") is None
    output = await groups.document_output(doc, "acme")
    assert output is not None and (output.status, output.format, output.text) == ("splitting", "txt", None)
    assert await groups.request_cancel("run", run_id, "acme") == 2


async def test_unknown_groups_lock_nothing(groups: GroupStore) -> None:
    async with groups.locked_group("document", str(uuid.uuid4())) as group:
        assert group is None
    async with groups.locked_document(str(uuid.uuid4())) as document:
        assert document is None
    assert await groups.callback_url("run", str(uuid.uuid4())) is None


async def test_a_run_counts_its_rows_and_finishes_cancelled_when_asked(groups: GroupStore, pg: Any) -> None:
    run_id = await _running_run(groups, total=3)
    _job_row(pg, "run_id", run_id, 0, "succeeded", "un")
    _job_row(pg, "run_id", run_id, 1, "cancelled")
    assert await groups.request_cancel("run", run_id) == 3
    async with groups.locked_group("run", run_id):
        assert await groups.count_job_rows("run", run_id) == 2
        assert await groups.complete_run(run_id) == "cancelled"
    progress = await groups.progress("run", run_id)
    assert progress is not None and progress.status == "cancelled" and progress.completed_at is not None


async def test_a_document_is_split_then_assembled_from_its_rows_in_order(groups: GroupStore, pg: Any) -> None:
    doc = str(uuid.uuid4())
    await groups.create_document(doc, "txt", "Hello. World.", "en", "fr", "letter", None, 100)
    async with groups.locked_document(doc) as document:
        assert document == LockedDocument("splitting", "txt", "Hello. World.", "en", "fr", 100, None, False)
        await groups.save_skeleton(doc, _SKELETON, 2)
        await groups.document_running(doc)
    _job_row(pg, "document_id", doc, 1, "failed")
    _job_row(pg, "document_id", doc, 0, "succeeded", "Bonjour.")

    async with groups.locked_group("document", doc) as group:
        assert group == LockedGroup("running", 2, None)
        assembly = await groups.assembly_input(doc)
        assert assembly.skeleton == _SKELETON and assembly.cancel_requested is False and assembly.target_lang == "fr"
        assert assembly.segments == [
            SegmentRow(0, "succeeded", "Bonjour.", None),
            SegmentRow(1, "failed", None, "boom"),
        ]
        report = {"segments": 2, "with_tags": 0, "failed": 1}
        await groups.save_assembly(doc, "Bonjour. World.", [{"segment": 1, "status": "failed"}], "failed", report)

    assert await groups.document_output(doc) == (
        "failed",
        "txt",
        "Bonjour. World.",
        [{"segment": 1, "status": "failed"}],
        {"segments": 2, "with_tags": 0, "failed": 1},
    )
    row = pg.execute("SELECT assemblies, submitted_at IS NOT NULL FROM documents WHERE id = %s", (doc,)).fetchone()
    assert row == (1, True)


async def test_a_document_cancelled_or_unsplittable_before_splitting_is_final(groups: GroupStore) -> None:
    cancelled, broken = str(uuid.uuid4()), str(uuid.uuid4())
    for doc in (cancelled, broken):
        await groups.create_document(doc, "html", "<p>x</p>", "en", "fr", None, None, 100)
    assert await groups.request_cancel("document", cancelled) == 0
    async with groups.locked_document(cancelled) as document:
        assert document is not None and document.cancel_requested
        await groups.cancel_unsplit_document(cancelled)
    async with groups.locked_document(broken):
        await groups.fail_document(broken, "not valid HTML")

    gone, failed = await groups.progress("document", cancelled), await groups.progress("document", broken)
    assert gone is not None and (gone.status, gone.counts.total) == ("cancelled", 0) and gone.completed_at
    assert failed is not None and (failed.status, failed.error) == ("failed", "not valid HTML") and failed.completed_at


async def test_webhook_attempts_are_counted_and_a_give_up_is_final(groups: GroupStore, pg: Any) -> None:
    run_id = await _running_run(groups, callback_url="https://hooks.example/run")
    assert await groups.callback_url("run", run_id) == "https://hooks.example/run"
    await groups.record_webhook_attempt("run", run_id, "retrying")
    await groups.record_webhook_attempt("run", run_id, "retrying")
    assert pg.execute("SELECT webhook_status, webhook_attempts FROM runs WHERE id = %s", (run_id,)).fetchone() == (
        "retrying",
        2,
    )
    await groups.webhook_gave_up("run", run_id)
    assert pg.execute("SELECT webhook_status, webhook_attempts FROM runs WHERE id = %s", (run_id,)).fetchone() == (
        "failed",
        2,
    )
