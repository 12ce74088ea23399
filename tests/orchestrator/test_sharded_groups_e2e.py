"""Runs and documents through a real worker on three shards: on the one embedded server and on a Redis Cluster.

The producer queues each job on its own shard and the worker reads every shard and finishes each
result on the shard it read it from (the producer's and worker's shard support, merged beside the
group parts): the group's parts complete on their shards, and the run or document finishes once.
Skipped where the worker does not read every shard yet (this branch before that merge).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.ids import job_id_for
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from tests.orchestrator.test_runs_and_documents import orchestrate_until, run_orchestrator, write_jsonl
from tests.orchestrator.test_sharded_groups import _Hook, _records_left, hook, on_cluster, sharded, sharded_client
from tests.worker.conftest import WorkerFactory, identity_worker
from worker.consumer import StreamConsumer
from worker.deterministic_engine import DeterministicEngine

__all__ = ["hook", "on_cluster", "sharded", "sharded_client"]

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not hasattr(StreamConsumer, "shards"), reason="the worker does not read every shard yet"),
]


async def test_a_run_and_a_document_through_a_worker_on_three_shards_finish_once(
    sharded_client: Client, start_worker: WorkerFactory, hook: tuple[str, type[_Hook]], tmp_path: Path
) -> None:
    url, handler = hook
    client = sharded_client
    path = write_jsonl(tmp_path / "r.jsonl", [{"custom_id": str(i), "text": f"t {i}"} for i in range(30)])
    run_id = client.submit_run(path, source_lang="en", target_lang="fr", callback_url=url)
    assert {client.keys.shard_of(job_id_for(run_id, n)) for n in range(30)} == {0, 1, 2}
    source = " ".join(f"Sentence number {n}." for n in range(40))
    document_id = client.submit_document(source, "txt", "en", "fr", max_segment_chars=40, callback_url=url)

    def done() -> bool:
        return client.get_run(run_id).status == "completed" and client.get_document(document_id).status == "completed"

    async with start_worker(DeterministicEngine()):
        await orchestrate_until(done, "the run and the document completed")
    for _ in range(3):
        run_orchestrator()
    assert len(handler.received) == 2  # one webhook each
    assert client.document_result(document_id).text == source
    assert _records_left(client, run_id) == 0 and _records_left(client, document_id) == 0


async def test_a_run_through_a_worker_on_a_redis_cluster_finishes_once(
    on_cluster: Settings, hook: tuple[str, type[_Hook]], tmp_path: Path
) -> None:
    url, handler = hook
    assert on_cluster.redis_url and on_cluster.database_url
    urls = ServiceUrls(redis_url=on_cluster.redis_url, database_url=on_cluster.database_url)
    path = write_jsonl(tmp_path / "r.jsonl", [{"custom_id": str(i), "text": f"t {i}"} for i in range(30)])
    with Client(on_cluster) as client:
        run_id = client.submit_run(path, source_lang="en", target_lang="fr", callback_url=url)
        worker = identity_worker(on_cluster, urls, DeterministicEngine())
        await worker.start()
        try:
            await orchestrate_until(lambda: client.get_run(run_id).status == "completed", "the run completed")
        finally:
            await worker.stop(grace_seconds=5)
        for _ in range(3):
            run_orchestrator()
        assert len(handler.received) == 1
        assert [row["translation"] for row in client.iter_run_results(run_id)] == [f"t {i}" for i in range(30)]
        assert _records_left(client, run_id) == 0
