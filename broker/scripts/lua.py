"""One Lua file of this package and the ways to run it: EVALSHA, loading it when the server lacks it.

The typed wrappers next to each ``.lua`` file build its KEYS and ARGV and read its reply; this
module only sends them, on asyncio clients, one path each: a single call, a pipelined batch, a
place on a MULTI/EXEC pipeline (synchronous callers run the async ones through
``contract/sync_bridge.py``).
Every way of running a script goes through the caller's own client, so its connections keep
packing commands with hiredis (``broker/redis_client.py``).

redis-py's ``Script`` objects are not used for single calls and batches: their per-call overhead
was larger than the rest of the submit path's work per job, and on a pipeline they cost one
``SCRIPT EXISTS`` round trip per ``execute``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from broker.redis_client import is_cluster
from contract.errors import SubmitNotReplicatedError

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline as AsyncPipeline
    from redis.asyncio.cluster import RedisCluster

Arg = str | int | float
"""One ARGV value (redis-py sends a float as its ``repr``)."""


class Replication(NamedTuple):
    """How many replicas must hold a pipeline's writes (Redis ``WAIT``), and how long to wait for them."""

    replicas: int
    timeout_ms: int


class LuaScript:
    """The source and SHA1 of one ``.lua`` file of this package, and how to run it by EVALSHA."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.source = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    async def run(self, client: aioredis.Redis, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run the script once and return its raw reply, loading it first if the server lacks it."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)

    async def run_pipelined(
        self, client: aioredis.Redis, queue: Callable[[AsyncPipeline], None], *, wait: Replication | None = None
    ) -> list[Any]:
        """Send what ``queue`` puts on a non-transactional pipeline in one round trip; return the replies.

        ``queue`` must add only EVALSHAs of this script (``pipe.evalsha(self.sha, ...)``). The calls
        a server answered NOSCRIPT (it lost its script cache in a restart; on a Redis Cluster, a
        replica just promoted, while the other nodes ran theirs) did not run: the script is
        loaded and those calls, only those, are sent again, once. Any other error is raised.

        With ``wait``, ``WAIT <replicas> <timeout>`` follows the calls on each connection that sent
        them (``WAIT`` counts the writes of the connection it is sent on): at the end of the pipeline
        on a single server; on a Redis Cluster, where the pipeline sends each node's commands on one
        connection of that node, one ``WAIT`` per node, targeted at it. Fewer replicas in time raises
        :class:`~contract.errors.SubmitNotReplicatedError` carrying the replies (the calls did run).
        """
        calls = _EvalshaCalls()
        queue(cast("AsyncPipeline", calls))
        replies, acknowledged = await self._send(client, calls.args, wait)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            await client.script_load(self.source)
            resent, acknowledged_again = await self._send(client, [calls.args[i] for i in missing], wait)
            for i, reply in zip(missing, resent, strict=True):
                replies[i] = reply
            acknowledged = min(acknowledged, acknowledged_again)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        if wait is not None and acknowledged < wait.replicas:
            raise SubmitNotReplicatedError(
                f"{len(replies):,} calls ran on the Redis primary, but only {acknowledged} of {wait.replicas} "
                f"replicas confirmed them within {wait.timeout_ms} ms",
                [str(reply) for reply in replies],
            )
        return replies

    async def _send(
        self, client: aioredis.Redis, calls: Sequence[tuple[Any, ...]], wait: Replication | None
    ) -> tuple[list[Any], int]:
        """One pipeline of ``calls`` (EVALSHA arguments), with ``wait``'s WAITs after them; the calls' replies
        and the fewest replicas any WAIT counted (``wait.replicas`` without a wait)."""
        waits = 0
        async with client.pipeline(transaction=False) as pipe:
            for args in calls:
                # Not pipe.evalsha: redis-py's cluster pipeline refuses that method ("blocked in cluster mode"),
                # while the command itself routes by its first key like any keyed command.
                pipe.execute_command("EVALSHA", *args)
            if wait is not None and calls:
                if is_cluster(client):
                    cluster = cast("RedisCluster", client)
                    await cluster.initialize()
                    nodes = {}
                    for args in calls:  # (sha, number of keys, first key, ...): the node of its slot ran it
                        node = cluster.get_node_from_key(str(args[2]))
                        if node is not None:
                            nodes[node.name] = node
                    for node in nodes.values():
                        pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms, target_nodes=node)
                    waits = len(nodes)
                else:
                    pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms)
                    waits = 1
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        acknowledged = 0 if wait is None else wait.replicas
        for reply in replies[len(calls) : len(calls) + waits]:
            if isinstance(reply, Exception):
                raise reply
            acknowledged = min(acknowledged, int(reply))
        return replies[: len(calls)], acknowledged

    def queue_on(self, pipe: AsyncPipeline, keys: Sequence[str], args: Sequence[Arg]) -> None:
        """Queue one EVALSHA on an asyncio pipeline (a MULTI/EXEC one too, beside other writes).

        The pipeline checks that the server has the script (``SCRIPT EXISTS``, loading it if not)
        before it sends anything, so a NOSCRIPT reply cannot split a transaction. A Redis Cluster's
        pipeline has no such check (nor an evalsha method): there the script goes as EVAL, with its source.
        """
        if not hasattr(pipe, "scripts"):  # redis-py's ClusterPipeline
            pipe.execute_command("EVAL", self.source, len(keys), *keys, *args)
            return
        # redis-py's own script object is what its pipeline loads before executing (the set is
        # annotated with the synchronous Script class, which the asyncio pipeline never holds).
        pipe.scripts.add(AsyncScript(pipe, self.source))  # type: ignore[arg-type]
        pipe.evalsha(self.sha, len(keys), *keys, *args)


class _EvalshaCalls:
    """Stands in for a pipeline while a caller queues EVALSHAs: records them, to send (and resend) later."""

    def __init__(self) -> None:
        self.args: list[tuple[Any, ...]] = []

    def evalsha(self, *args: Any) -> None:
        """Record one EVALSHA's arguments (sha, number of keys, keys, argv)."""
        self.args.append(args)
