"""``dragoman services up --cluster``: a local Redis Cluster beside the embedded servers, its URL printed
for export, shown by ``status`` and stopped by ``down``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.redis_client import is_cluster, open_redis
from cli.main import EXIT_ERROR, EXIT_OK, main
from storage.embedded_cluster import services_cluster


def _exports(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if line.startswith("DRAGOMAN_"))


async def _roundtrip(url: str) -> str | None:
    client = open_redis(url)
    try:
        assert is_cluster(client)
        for shard in range(3):
            await client.set(f"{{probe:{shard}}}:k", "v")
        return await client.get("{probe:2}:k")
    finally:
        await client.aclose()


def test_services_up_cluster_prints_the_cluster_beside_the_single_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("DRAGOMAN_REDIS_URL", "DRAGOMAN_DATABASE_URL", "DRAGOMAN_REDIS_SHARDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DRAGOMAN_DATA_DIR", str(tmp_path / "data"))
    try:
        assert main(["services", "up", "--cluster"]) == EXIT_OK
        exports = _exports(capsys.readouterr().out)
        cluster = services_cluster(tmp_path / "data")
        assert exports["DRAGOMAN_REDIS_URL"] == cluster.url
        assert exports["DRAGOMAN_REDIS_URL"].startswith("redis+cluster://127.0.0.1:")
        assert exports["DRAGOMAN_REDIS_SHARDS"] == "9"  # three per primary
        assert exports["DRAGOMAN_ORCHESTRATION_REDIS_URL"].startswith("unix://")  # the single server, for RQ
        assert exports["DRAGOMAN_DATABASE_URL"].startswith("postgresql")
        assert cluster.running()
        assert asyncio.run(_roundtrip(exports["DRAGOMAN_REDIS_URL"])) == "v"

        # again: nothing new started, the same URLs
        assert main(["services", "up", "--cluster"]) == EXIT_OK
        assert _exports(capsys.readouterr().out) == exports

        assert main(["services", "status"]) == EXIT_OK
        captured = capsys.readouterr()
        assert f"embedded Redis Cluster in {cluster.data_dir}: running" in captured.err
        assert captured.err.count(" primary ") == 3 and captured.err.count(" replica ") == 3

        assert main(["services", "down"]) == EXIT_OK
        assert capsys.readouterr().out.strip() == "stopped"
        assert not cluster.running() and all(node.pid is None for node in cluster.nodes())
        assert main(["services", "status"]) == EXIT_ERROR
        assert "not running (`dragoman services up --cluster` starts it)" in capsys.readouterr().err
    finally:
        main(["services", "down"])
