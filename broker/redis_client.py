"""The asyncio Redis client every process opens, with commands packed in C.

redis-py's asyncio connections pack every command in Python (its synchronous ones use hiredis
when it is installed). The worker sends a few thousand arguments per read (start script) and writer
batch (finish script), and the producers eleven per job in the submit script: at thousands of jobs per
second that packing was the largest single cost of the worker's pipeline and of an OpenAI
batch's enqueueing (the asyncio ``AsyncClient`` took 40% longer than the synchronous ``Client``
to submit the same 100,000 jobs), so these connections pack with hiredis like the synchronous
client.

The worker decodes replies with ``surrogateescape``: a producer that writes bytes that are not
UTF-8 must get its entry dead-lettered, not crash every worker that reads it (strict decoding
fails the whole XREADGROUP reply). The wire decoder refuses such fields, and the writer makes
them valid text before it parks them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, ClusterPubSub, RedisCluster
from redis.connection import HiredisRespSerializer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.utils import HIREDIS_AVAILABLE

from contract.errors import ConfigurationError
from contract.overload import ServerBusyError

CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
"""URL schemes naming a Redis Cluster by its seed nodes (value: whether TLS is on)."""

_packers: dict[type[Any], type[Any]] = {}


class RedisPoolBusyError(ServerBusyError, RedisConnectionError):
    """Every connection of a waiting pool stayed in use for its whole wait: load, not an outage.

    A ``redis.ConnectionError`` too, so callers that fall back or retry when Redis is away (the
    completion-event listener, say) do the same when the pool is busy.
    """


class _WaitingPool(aioredis.BlockingConnectionPool):
    """redis-py's blocking pool, whose wait past its timeout raises :class:`RedisPoolBusyError`.

    redis-py raises the same ``ConnectionError`` for "no free connection in time" as for a
    server that cannot be reached; the HTTP API answers the first ``503 server_busy`` with
    ``Retry-After`` and only the second as an outage.
    """

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except RedisConnectionError as exc:
            if isinstance(exc.__cause__, TimeoutError) and not isinstance(exc, RedisPoolBusyError):
                raise RedisPoolBusyError("Redis", self.max_connections, self.timeout or 0.0) from None
            raise


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://`` or ``rediss+cluster://`` seed nodes)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def is_cluster(client: aioredis.Redis) -> bool:
    """Whether ``client`` (from :func:`open_redis`) talks to a Redis Cluster."""
    return isinstance(client, RedisCluster)


def open_redis(
    url: str, *, encoding_errors: str = "strict", wait_for_connection_s: float | None = None, **options: Any
) -> aioredis.Redis:
    """An asyncio client for ``url`` (any scheme redis-py accepts, or a cluster's seed nodes, see
    :func:`open_cluster`) that decodes replies to str (``encoding_errors="surrogateescape"``:
    losslessly), with redis-py's connection ``options``.

    With ``wait_for_connection_s``, a command finding all ``max_connections`` in use waits that
    long for one to be free (then :class:`RedisPoolBusyError`), instead of failing at once with
    ``MaxConnectionsError``: what a client shared by many concurrent callers needs. A cluster
    client always waits (without ``wait_for_connection_s``, as long as it takes; see
    :class:`_InitializedFirstCluster`).
    """
    if is_cluster_url(url):
        return open_cluster(
            url, encoding_errors=encoding_errors, wait_for_connection_s=wait_for_connection_s, **options
        )
    if wait_for_connection_s is None:
        pool = aioredis.ConnectionPool.from_url(url, decode_responses=True, encoding_errors=encoding_errors, **options)
    else:
        pool = _WaitingPool.from_url(
            url, decode_responses=True, encoding_errors=encoding_errors, timeout=wait_for_connection_s, **options
        )
    if HIREDIS_AVAILABLE:
        pool.connection_class = _hiredis_packing(pool.connection_class)
    return aioredis.Redis.from_pool(pool)


@contextlib.contextmanager
def connection_faults_as_errors() -> Iterator[None]:
    """Raise the ``ConnectionError`` that redis-py 8.1 leaks as an ``AttributeError``, ``TypeError`` or (under uvloop)
    ``RuntimeError``.

    A connection the server closed (a Redis Cluster primary killed mid-failover), or one a concurrent
    command disconnects while it connects, fails deep in redis-py or asyncio's transport with
    ``'NoneType' object has no attribute 'writelines'`` and the like (redis/redis-py#4287), or with uvloop's
    ``unable to perform operation on <TCPTransport closed=True ...>; the handler is closed``: not a
    ``RedisError``, so it escaped the worker's outage handling and ended its read loop. Only errors raised
    inside redis-py (or the asyncio transport under it) are turned; any other is left as it is.
    """
    try:
        yield
    except (AttributeError, TypeError, RuntimeError) as exc:
        closed_transport = not isinstance(exc, RuntimeError) or _CLOSED_HANDLER in str(exc)
        if not closed_transport or not _raised_in_redis(exc.__traceback__):
            raise
        raise RedisConnectionError(f"the connection to Redis broke ({type(exc).__name__}: {exc})") from exc


_CLOSED_HANDLER = "the handler is closed"
"""What uvloop's transport says when written to after the connection under it closed."""


def _raised_in_redis(trace: TracebackType | None) -> bool:
    """Whether a traceback passes through redis-py and ends in redis-py or asyncio's own code."""
    through_redis = False
    module = ""
    while trace is not None:
        module = str(trace.tb_frame.f_globals.get("__name__", ""))
        through_redis = through_redis or module.startswith("redis.")
        trace = trace.tb_next
    return through_redis and module.startswith(("redis.", "asyncio."))


def open_cluster(
    url: str, *, encoding_errors: str = "strict", wait_for_connection_s: float | None = None, **options: Any
) -> aioredis.Redis:
    """A Redis Cluster client for ``redis+cluster://[user:password@]host:port[,host:port...]``
    (``rediss+cluster://`` for TLS): any of the seed nodes tells the client the cluster's layout.

    The client has the same commands as a single server's (typed as one: the broker's callers use
    only commands both route; multi-key commands must name keys of one hash tag). A command or
    pipeline finding ``max_connections`` in use waits for one (``wait_for_connection_s``, then
    :class:`RedisPoolBusyError`; ``None``: as long as it takes).
    """
    parts = urlsplit(url)
    tls = CLUSTER_SCHEMES.get(parts.scheme)
    if tls is None:
        raise ConfigurationError(f"{url!r} is not a Redis Cluster URL: use redis+cluster://host:port[,host:port...]")
    netloc = parts.netloc
    credentials, _, hosts = netloc.rpartition("@")
    username, _, password = credentials.partition(":") if credentials else ("", "", "")
    nodes: list[ClusterNode] = []
    for seed in hosts.split(","):
        host, _, port = seed.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigurationError(
                f"Redis Cluster seed node {seed!r} in DRAGOMAN_REDIS_URL is not host:port "
                "(write redis+cluster://host:port[,host:port...])"
            )
        nodes.append(ClusterNode(host.strip("[]"), int(port)))
    cluster = _InitializedFirstCluster(
        startup_nodes=nodes,
        decode_responses=True,
        encoding_errors=encoding_errors,
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=tls,
        wait_for_connection_s=wait_for_connection_s,
        **options,
    )
    return cast(aioredis.Redis, cluster)


_HOLDS_A_TURN: ContextVar[bool] = ContextVar("dragoman_cluster_turn", default=False)
"""Whether this task already holds one of its cluster client's turns (a pipeline's redirected command
runs inside it: taking a second turn there could wait for ever)."""


class _InitializedFirstCluster(RedisCluster):
    """redis-py's cluster client, which learns the cluster's layout before a command's first step and
    lets a command wait for a connection rather than fail.

    Initialized first: redis-py 8.1's ``execute_command`` resolves the command's routing policy (a
    ``COMMAND`` sent on a seed node's connection) before it initializes the client, and initializing
    closes the seed nodes' connections: on a fresh client, commands started together (one per shard,
    as the dispatcher, stats and lookups do) failed about one time in ten with ``AttributeError:
    'NoneType' object has no attribute 'writelines'`` (``dragoman rq-worker`` exited at start).

    Turns: redis-py's cluster node raises ``MaxConnectionsError`` at once when its ``max_connections``
    are in use, and a cluster *pipeline* takes that (a ``ConnectionError``) for a failed node and
    closes every connection of the client, those of every other request in flight included: under
    load (300 concurrent ``POST /v1/jobs?wait=`` on one API server) a tenth of the requests failed with
    500/503 and "Connection closed by server". So at most ``max_connections - 1`` commands or
    pipelines run at once (each holds at most one connection per node; one is left for the
    completion-event subscription); the others wait their turn, as a single server's waiting pool does.
    """

    def __init__(self, *args: Any, wait_for_connection_s: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_connections = int(kwargs.get("max_connections", 100))
        self._turns = asyncio.Semaphore(max(1, self._max_connections - 1))
        self._turn_wait_s = wait_for_connection_s

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold one of the client's turns for a command or pipeline (at once if this task holds one)."""
        if _HOLDS_A_TURN.get():
            yield
            return
        try:
            async with asyncio.timeout(self._turn_wait_s):
                await self._turns.acquire()
        except TimeoutError:
            raise RedisPoolBusyError("Redis", self._max_connections, self._turn_wait_s or 0.0) from None
        held = _HOLDS_A_TURN.set(True)
        try:
            yield
        finally:
            _HOLDS_A_TURN.reset(held)
            self._turns.release()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """Initialize the client if it is not yet (or no longer, after a failover), then run the command
        in a turn."""
        if self._initialize:
            await self.initialize()
        async with self.turn():
            return await super().execute_command(*args, **kwargs)

    def pubsub(
        self, node: ClusterNode | None = None, host: str | None = None, port: int | None = None, **kwargs: Any
    ) -> ClusterPubSub:
        """redis-py's cluster subscription, which initializes the client before its first command."""
        return _InitializingPubSub(self, node=node, host=host, port=port, **kwargs)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterPipeline:
        """redis-py's cluster pipeline, whose ``execute`` runs in a turn."""
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # redis-py's own error
        return _TurnTakingPipeline(self, transaction)  # type: ignore[abstract]  # as redis-py makes its own


class _InitializingPubSub(ClusterPubSub):
    """A cluster subscription that initializes its client first: redis-py 8.1 picks the subscription's
    node from the slots it has learnt, and a client that had sent nothing yet (a producer whose first
    call is a ``wait``) failed with ``KeyError`` (a slot number), which no caller takes for Redis's error."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """Initialize the client if it is not yet, then send the (P)SUBSCRIBE or other command."""
        if self.cluster._initialize:
            await self.cluster.initialize()
        return await super().execute_command(*args, **kwargs)


class _TurnTakingPipeline(ClusterPipeline):
    """A cluster pipeline that executes in one of its client's turns (:class:`_InitializedFirstCluster`)."""

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        """Send the queued commands once a turn is free; their replies, in order."""
        client = cast(_InitializedFirstCluster, self.cluster_client)
        async with client.turn():
            return await super().execute(raise_on_error, allow_redirections)


def _hiredis_packing(base: type[Any]) -> type[Any]:
    """``base`` (TCP, TLS or Unix socket connection) with hiredis's command packer."""
    packing = _packers.get(base)
    if packing is None:
        serializer = HiredisRespSerializer()  # type: ignore[no-untyped-call, unused-ignore]  # untyped since redis-py 8.2

        def pack_command(self: Any, *args: Any) -> list[bytes]:
            command = args[0]
            if isinstance(command, str) and " " not in command:  # every command the worker sends
                try:
                    return [hiredis.pack_command(args)]
                except TypeError:
                    pass  # memoryviews and unsupported types: redis-py's way, with its DataError
            return serializer.pack(*args)  # type: ignore[no-any-return]

        packing = type(f"HiredisPacking{base.__name__}", (base,), {"pack_command": pack_command})
        _packers[base] = packing
    return packing


async def ping(client: aioredis.Redis) -> None:
    """``PING``: raises redis-py's error if the server does not answer (readiness probes)."""
    await client.ping()
