"""The queue seam: outside ``broker/``, no module sends Redis a command itself.

The way ``storage/`` owns every SQL statement, ``broker/`` owns every Redis command: the others call
its functions. An AST scan finds attribute calls named like redis-py's command methods (``xadd``,
``hset``, ``pipeline``, ``evalsha``, ...) on anything. Names that are also ordinary Python methods
(``get``, ``set``, ``delete``, ``expire``, ...) count only on a receiver that names a Redis client
or pipeline (``redis``, ``pipe``), so a dict's ``get`` is not one.
"""

from __future__ import annotations

import ast
from pathlib import Path

from redis.commands.core import CoreCommands

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = {"broker", "tests", "bench", "migrations"}  # the seam itself, and what may import anything

# Also ordinary method names (dicts, sets, events, files, loggers, sockets, processes, hashes...).
AMBIGUOUS = {
    "append", "copy", "delete", "digest", "dump", "echo", "exists", "expire", "get", "info", "keys", "listen",
    "move", "rename", "reset", "restore", "save", "set", "shutdown", "sort", "time", "type", "unlink", "wait", "watch",
}  # fmt: skip
COMMANDS = (
    {name for name in dir(CoreCommands) if not name.startswith("_")}
    | {"pipeline", "pubsub", "execute_command", "register_script", "subscribe", "psubscribe", "ssubscribe"}
    | {"get_message", "listen"}
)


def raw_redis_calls(source: str) -> list[tuple[int, str, str]]:
    """``(line, command, receiver)`` of each call in ``source`` that looks like a raw Redis command."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name not in COMMANDS:
            continue
        receiver = ast.unparse(node.func.value)
        if name in AMBIGUOUS and not _names_redis(receiver):
            continue
        found.append((node.lineno, name, receiver))
    return sorted(found)


def _names_redis(receiver: str) -> bool:
    last = receiver.rsplit(".", 1)[-1].lower()
    return last.endswith("redis") or last in {"pipe", "pipeline", "pubsub", "connection"}


def _modules() -> list[Path]:
    packages = [p for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in OUTSIDE]
    return sorted(path for package in packages for path in package.rglob("*.py"))


# Raw calls outside broker/ on purpose: (module, receiver.command) -> why. Each must still be there.
EXEMPT = {
    ("storage/embedded_cluster.py", "client.execute_command"): "EmbeddedCluster._command joins and inspects the "
    "local cluster's nodes (CLUSTER MEET/ADDSLOTS/REPLICATE, INFO): no dragoman data; storage may not import broker",
}


def test_no_module_outside_broker_sends_a_raw_redis_command() -> None:
    offenders = []
    exempt_seen = set()
    for path in _modules():
        relative = path.relative_to(ROOT).as_posix()
        for line, name, receiver in raw_redis_calls(path.read_text(encoding="utf-8")):
            if (relative, f"{receiver}.{name}") in EXEMPT:
                exempt_seen.add((relative, f"{receiver}.{name}"))
                continue
            offenders.append(f"{relative}:{line}: {receiver}.{name}(...)")
    assert exempt_seen == set(EXEMPT), f"exemptions no longer needed: {set(EXEMPT) - exempt_seen}"
    assert not offenders, "send Redis commands through broker/ (a function there):\n" + "\n".join(offenders)


def test_the_scan_finds_raw_commands_and_leaves_ordinary_methods_alone() -> None:
    source = """
async def f(self, redis, pipe, cache, writer, event):
    await redis.xadd("s", {})
    await self._redis.xreadgroup("g", "c", {"s": ">"})
    async with self._redis.pipeline() as p:
        pipe.expire("k", 1)
    await redis.delete("k")
    self.client.redis.ping()
    cache.get("k"); cache.set("k", 1); writer.expire(3); event.wait(); items.append(1); client.get("job")
    self._redis_socket.exists(); raw_redis.exists("k"); self._finishes.watch("job"); redis.watch("k")
    other.evalsha("sha", 0)
"""
    found = [(name, receiver) for _, name, receiver in raw_redis_calls(source)]
    assert found == [
        ("xadd", "redis"),
        ("xreadgroup", "self._redis"),
        ("pipeline", "self._redis"),
        ("expire", "pipe"),
        ("delete", "redis"),
        ("ping", "self.client.redis"),
        ("exists", "raw_redis"),
        ("watch", "redis"),
        ("evalsha", "other"),
    ]
