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

import contextlib
from collections.abc import Iterator
from types import TracebackType
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
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
    ``MaxConnectionsError``: what a client shared by many concurrent callers needs (a cluster
    client keeps a pool per node and fails at once instead).
    """
    if is_cluster_url(url):
        return open_cluster(url, encoding_errors=encoding_errors, **options)
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
    """Raise the ``ConnectionError`` that redis-py 8.1 leaks as an ``AttributeError`` or ``TypeError``.

    A connection the server closed (a Redis Cluster primary killed mid-failover), or one a concurrent
    command disconnects while it connects, fails deep in redis-py or asyncio's transport with
    ``'NoneType' object has no attribute 'writelines'`` and the like (redis/redis-py#4287): not a
    ``RedisError``, so it escaped the worker's outage handling and ended its read loop. Only errors raised
    inside redis-py (or the asyncio transport under it) are turned; any other is left as it is.
    """
    try:
        yield
    except (AttributeError, TypeError) as exc:
        if not _raised_in_redis(exc.__traceback__):
            raise
        raise RedisConnectionError(f"the connection to Redis broke ({type(exc).__name__}: {exc})") from exc


def _raised_in_redis(trace: TracebackType | None) -> bool:
    """Whether a traceback passes through redis-py and ends in redis-py or asyncio's own code."""
    through_redis = False
    module = ""
    while trace is not None:
        module = str(trace.tb_frame.f_globals.get("__name__", ""))
        through_redis = through_redis or module.startswith("redis.")
        trace = trace.tb_next
    return through_redis and module.startswith(("redis.", "asyncio."))


def open_cluster(url: str, *, encoding_errors: str = "strict", **options: Any) -> aioredis.Redis:
    """A Redis Cluster client for ``redis+cluster://[user:password@]host:port[,host:port...]``
    (``rediss+cluster://`` for TLS): any of the seed nodes tells the client the cluster's layout.

    The client has the same commands as a single server's (typed as one: the broker's callers use
    only commands both route; multi-key commands must name keys of one hash tag).
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
    cluster = RedisCluster(
        startup_nodes=nodes,
        decode_responses=True,
        encoding_errors=encoding_errors,
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=tls,
        **options,
    )
    return cast(aioredis.Redis, cluster)


def _hiredis_packing(base: type[Any]) -> type[Any]:
    """``base`` (TCP, TLS or Unix socket connection) with hiredis's command packer."""
    packing = _packers.get(base)
    if packing is None:
        serializer = HiredisRespSerializer()

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
