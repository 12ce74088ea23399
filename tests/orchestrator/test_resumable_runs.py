"""Runs whose submission stops half-way: resumed with the same run id, or cancelled, never left ``submitting``.

Each test reproduces a run that the old code left ``submitting`` forever: Redis failed after two
of five chunks (the third half-written), and neither submitting again nor cancelling finished it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from broker.scripts import SubmitScript
from contract.errors import InvalidJobError, SubmitInterruptedError
from contract.schemas import JobSpec
from producer.client import Client
from producer.run_files import InvalidRunFileError
from tests.orchestrator.test_runs_and_documents import orchestrate_until, write_jsonl
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

pytestmark = pytest.mark.timeout(300)

LINES = 50
CHUNK = 10


@pytest.fixture(autouse=True)
def _env(settings_env: Any) -> None:
    """The RQ tasks read their settings from the environment."""


def _crash_on_third_chunk(client: Client) -> None:
    """The submitter writes two chunks, half of the third, then Redis goes away (until :func:`_recover`)."""
    client.settings.submit_chunk_size = CHUNK
    submitter = client.core.submitter
    original = submitter.submit_specs
    calls = 0

    async def failing(specs: Sequence[JobSpec], *, only_new: bool = False) -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            await original(specs[: len(specs) // 2], only_new=only_new)
            raise redis.ConnectionError("Redis went away")
        return await original(specs, only_new=only_new)

    submitter.submit_specs = failing  # type: ignore[method-assign]


def _recover(client: Client) -> None:
    del client.core.submitter.submit_specs


def _run_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "run.jsonl", [{"custom_id": f"row-{i}", "text": f"line {i}"} for i in range(LINES)])


async def test_a_stopped_submission_is_completed_by_submitting_again_with_the_same_id(
    client: Client, tmp_path: Path, raw_redis: redis.Redis, start_worker: WorkerFactory
) -> None:
    path = _run_file(tmp_path)
    run_id = "6f1c1a4e-9d1b-4c55-8a53-6f7e0d1c2b3a"
    _crash_on_third_chunk(client)
    with pytest.raises(redis.ConnectionError):
        client.submit_run(path, source_lang="en", target_lang="fr", run_id=run_id)
    assert client.get_run(run_id).status == "submitting"
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == 2 * CHUNK + CHUNK // 2
    _recover(client)

    assert client.submit_run(path, source_lang="en", target_lang="fr", run_id=run_id) == run_id
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == LINES  # the half-written chunk's jobs were not queued twice
    assert client.submit_run(path, source_lang="en", target_lang="fr", run_id=run_id) == run_id  # a no-op now
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == LINES
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(lambda: client.get_run(run_id).status == "completed", "the run completed")
    results = list(client.iter_run_results(run_id))
    assert [r["custom_id"] for r in results] == [f"row-{i}" for i in range(LINES)]


def test_resuming_with_another_file_is_refused(client: Client, tmp_path: Path) -> None:
    run_id = client.submit_run(_run_file(tmp_path), source_lang="en", target_lang="fr")
    other = write_jsonl(tmp_path / "other.jsonl", [{"custom_id": "x", "text": "y"}])
    with pytest.raises(InvalidJobError, match="has 50 jobs but this file has 1"):
        client.submit_run(other, source_lang="en", target_lang="fr", run_id=run_id)


async def test_a_half_submitted_run_can_be_cancelled_and_finishes(
    client: Client, tmp_path: Path, start_worker: WorkerFactory
) -> None:
    _crash_on_third_chunk(client)
    run_id = "0b3f2f7a-3c1e-4c7b-9a0d-1e2f3a4b5c6d"
    with pytest.raises(redis.ConnectionError):
        client.submit_run(_run_file(tmp_path), source_lang="en", target_lang="fr", run_id=run_id)
    _recover(client)
    client.cancel_run(run_id)
    async with start_worker(DeterministicEngine()):
        await orchestrate_until(lambda: client.get_run(run_id).status == "cancelled", "the run cancelled")
    run = client.get_run(run_id)
    assert (run.counts.cancelled, run.counts.pending) == (LINES, 0)
    results = list(client.iter_run_results(run_id))
    assert len(results) == LINES and {r["status"] for r in results} == {"cancelled"}
    assert results[-1]["error"] == "cancelled before it was submitted"


def test_submit_many_names_what_was_written_when_redis_fails(
    client: Client, monkeypatch: pytest.MonkeyPatch, raw_redis: redis.Redis
) -> None:
    client.settings.submit_chunk_size = 2
    items = [{"text": f"t{i}", "source_lang": "en", "target_lang": "fr", "idempotency_key": f"k{i}"} for i in range(5)]
    original = SubmitScript.call_many
    calls = 0

    async def failing(self: SubmitScript, *args: Any, **kwargs: Any) -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise redis.ConnectionError("Redis went away")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SubmitScript, "call_many", failing)
    with pytest.raises(SubmitInterruptedError, match="after 2 of 5 jobs were queued") as error:
        client.submit_many(items)
    monkeypatch.setattr(SubmitScript, "call_many", original)
    ids = client.submit_many(items)  # the idempotency keys make submitting again safe
    assert ids[:2] == error.value.written
    assert raw_redis.xlen(client.keys.jobs_stream) == 5


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"custom_id": "a", "text": "lone \\ud800 surrogate"}', "lone surrogate"),
        ('{"custom_id": "a\\u0000b", "text": "NUL in the id"}', "NUL"),
        ('{"custom_id": "a", "text": "NUL \\u0000 in the text"}', "NUL"),
        ('{"custom_id": "a", "text": "ok", "metadata": {"k": "\\udfff"}}', "lone surrogate"),
    ],
)
def test_text_that_cannot_be_stored_is_refused_before_anything_is_written(
    client: Client, tmp_path: Path, raw_redis: redis.Redis, line: str, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"custom_id": "first", "text": "fine"}\n' + line + "\n")
    with pytest.raises(InvalidRunFileError, match=reason):
        client.submit_run(path, source_lang="en", target_lang="fr")
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == 0


def test_a_document_that_cannot_be_stored_is_refused(client: Client) -> None:
    with pytest.raises(InvalidJobError, match="lone surrogate"):
        client.submit_document("Text with a \ud800 in it.", "txt", "en", "fr")


def test_names_and_callbacks_that_cannot_be_stored_are_refused_before_anything_is_written(
    client: Client, tmp_path: Path, raw_redis: redis.Redis
) -> None:
    client.settings.webhook_secret = "secret"
    path = _run_file(tmp_path)
    for kwargs in ({"name": "run\x00name"}, {"name": "run \udc80"}, {"callback_url": "https://example.com/\ud800"}):
        with pytest.raises(InvalidJobError, match="cannot be stored"):
            client.submit_run(path, source_lang="en", target_lang="fr", **kwargs)
    odd_file = tmp_path / "run-\udcff.jsonl"  # a file name that was not UTF-8 on disk
    odd_file.write_bytes(path.read_bytes())
    run_id = client.submit_run(odd_file, source_lang="en", target_lang="fr")
    assert client.get_run(run_id).name == "run-?.jsonl"
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == LINES  # only the good run's jobs


def test_the_run_submit_command_says_how_to_resume_once_part_is_queued_and_resumes_with_it(
    client: Client,
    tmp_path: Path,
    raw_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cli.main import main

    path = _run_file(tmp_path)
    # A run queued in one round trip leaves nothing to resume: no hint.
    assert main(["run", "submit", str(path), "--from", "en", "--to", "fr"]) == 0
    out = capsys.readouterr()
    assert "--run-id" not in out.err
    # A run queued in chunks: the hint comes once the first chunk is queued, so a crash leaves the id known.
    monkeypatch.setenv("DRAGOMAN_SUBMIT_CHUNK_SIZE", str(LINES // 5))
    assert main(["run", "submit", str(path), "--from", "en", "--to", "fr"]) == 0
    out = capsys.readouterr()
    run_id = out.out.strip()
    assert f"--run-id {run_id}" in out.err
    assert main(["run", "submit", str(path), "--from", "en", "--to", "fr", "--run-id", run_id]) == 0
    assert capsys.readouterr().out.strip() == run_id
    assert raw_redis.xlen(client.keys.bulk_jobs_stream) == 2 * LINES
