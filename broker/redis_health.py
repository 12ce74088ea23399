"""Is Redis able to serve every shard? The one check behind ``dragoman check`` and the worker's ``/readyz``.

A single server answers ``PING`` or it does not. A Redis Cluster can answer one node and still be
unusable: a primary down (its slots' shards stall until a replica takes over) or the cluster in
``fail`` state (some slot has no primary: every command of its keys is refused). So on a cluster
every primary is asked ``CLUSTER INFO`` (concurrently) and must say ``cluster_state:ok``, and every
shard's hash tag must map to a known primary; each failure is a problem of its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError

from broker.keys import RedisKeys
from broker.redis_client import is_cluster, ping

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.cluster import ClusterNode, RedisCluster


@dataclass(frozen=True, slots=True)
class RedisHealth:
    """What the check found: the server kind, its primaries (known, and healthy), the deployment's shards, problems.

    ``problems`` empty: every primary answered and every shard has one.
    """

    cluster: bool
    primaries: int
    shards: int
    problems: tuple[str, ...] = ()
    healthy_primaries: int | None = None  # None: all of them

    @property
    def ok(self) -> bool:
        """Every shard can be served."""
        return not self.problems

    @property
    def layout(self) -> str:
        """``cluster of 3 primaries, 3 shards`` or ``one server, 2 shards``; empty for one server and one shard."""
        if not self.cluster and self.shards == 1:
            return ""
        where = "one server"
        if self.cluster:
            where = f"cluster of {self.primaries} primar{'y' if self.primaries == 1 else 'ies'}"
            if self.healthy_primaries is not None and self.healthy_primaries != self.primaries:
                where += f" ({self.healthy_primaries} healthy)"
        return f"{where}, {self.shards} shard{'s' if self.shards != 1 else ''}"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view (``/readyz``'s ``redis``)."""
        healthy = self.primaries if self.healthy_primaries is None else self.healthy_primaries
        return {
            "cluster": self.cluster,
            "primaries": self.primaries,
            "healthy_primaries": healthy,
            "shards": self.shards,
        }


async def check_redis(client: aioredis.Redis, keys: RedisKeys) -> RedisHealth:
    """Check that Redis can serve every shard of ``keys``' deployment (see the module docstring).

    Raises redis-py's :class:`~redis.exceptions.RedisError` when nothing answers (a single server
    that does not, or a cluster none of whose seed nodes does); a cluster's partial failures are
    :attr:`RedisHealth.problems`.
    """
    if not is_cluster(client):
        await ping(client)
        return RedisHealth(cluster=False, primaries=1, shards=keys.shard_count)
    cluster = cast("RedisCluster", client)
    try:
        await cluster.initialize()
    except RedisClusterException as exc:  # not a RedisError: the callers' handling of "unreachable" must see it
        raise RedisConnectionError(f"no seed node of the Redis Cluster answered: {exc}") from exc
    primaries = cluster.get_primaries()
    answers = await asyncio.gather(*(_primary_state(cluster, node) for node in primaries))
    problems = [answer for answer in answers if answer is not None]
    names = {node.name for node in primaries}
    for shard in keys.shards:
        slot = cluster.keyslot(shard.tag)
        try:
            node = cluster.nodes_manager.get_node_from_slot(slot)
        except (RedisClusterException, RedisError) as exc:
            problems.append(f"shard {shard.shard} (slot {slot}) has no primary: {exc}")
            continue
        if node.name not in names:
            problems.append(f"shard {shard.shard} (slot {slot}) is on {node.name}, which is not a known primary")
    return RedisHealth(
        cluster=True,
        primaries=len(primaries),
        shards=keys.shard_count,
        problems=tuple(problems),
        healthy_primaries=sum(answer is None for answer in answers),
    )


async def _primary_state(cluster: RedisCluster, node: ClusterNode) -> str | None:
    """None if ``node`` answers ``CLUSTER INFO`` with ``cluster_state:ok``; what is wrong otherwise."""
    try:
        info = await cluster.cluster_info(target_nodes=node)
    except (RedisError, OSError, TimeoutError) as exc:
        return f"primary {node.name} unreachable: {exc or type(exc).__name__}"
    state = info.get("cluster_state") if isinstance(info, dict) else None
    if state != "ok":
        return f"primary {node.name} reports cluster_state {state!r} (a slot has no primary, or it lost its quorum)"
    return None
