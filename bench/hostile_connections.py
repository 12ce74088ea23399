"""The attacks of ``bench.hostile_api`` on connections themselves (issue 48, item 4): no key, no valid request.

- idle sockets: as many connections as the open-file limit allows (the API's own limit, plus 100), opened
  from child processes (each raises its soft limit to the hard one) and never sent a byte, held until the
  API has taken what it will (it is out of descriptors, or they stopped growing for ``STEADY_S``: accepting
  20,000 connections takes an old API up to half a minute) and ``hold_s`` more; then each is looked at:
  still open, closed by the server, or never accepted;
- unfinished heads: ``header_connections`` connections each sending a request head of ``header_mib`` MiB that
  never ends, held ``hold_s`` (the API's peak memory is the figure);
- one complete head with a header of ``big_header_mib`` MiB: what the server answers.
"""

from __future__ import annotations

import asyncio
import errno
import multiprocessing
import os
import resource
import socket
import struct
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

from bench.hostile_target import Outcome, Target

MIB = 1024 * 1024
SPARE_FILES = 64
"""Descriptors each flooding process keeps for itself."""
STEADY_S = 5.0
STEADY_MAX_S = 120.0
FULL_MARGIN = 16


def _linger_off(sock: socket.socket) -> None:
    """Closing sends a reset: 20,000 closed sockets leave no TIME_WAIT behind on the shared machine."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _look_at(sockets: list[socket.socket]) -> dict[str, int]:
    seen = {"open": 0, "closed by the server": 0, "answered": 0, "never accepted": 0}
    for sock in sockets:
        try:
            sock.getpeername()
        except OSError:
            seen["never accepted"] += 1
            continue
        try:
            data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            seen["answered" if data else "closed by the server"] += 1
        except BlockingIOError:
            seen["open"] += 1
        except OSError:
            seen["closed by the server"] += 1
    return seen


def hold_idle(port: int, count: int, report: Connection, release: Event) -> None:
    """Open up to ``count`` connections to ``port`` that send nothing; report how many, hold them until
    ``release``, then report what became of them (a child process's work: its own open-file limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sockets: list[socket.socket] = []
    failed = 0
    for _ in range(count):
        try:
            sock = socket.socket()
        except OSError:
            failed += count - len(sockets) - failed
            break
        sock.setblocking(False)
        _linger_off(sock)
        if sock.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS):
            sockets.append(sock)
        else:
            failed += 1
            sock.close()
    report.send(len(sockets))
    release.wait()
    seen = _look_at(sockets)
    for sock in sockets:
        sock.close()
    report.send({**seen, "not opened": failed})


def _descriptors(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _open_file_limit(pid: int) -> int:
    """Process ``pid``'s soft limit of open files (Linux: ``/proc``)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise ValueError(f"no open-file limit in /proc/{pid}/limits")


async def _until_taken(pid: int) -> float:
    """Wait until process ``pid`` is out of descriptors (``FULL_MARGIN`` of its limit), or its open descriptors
    have not grown for ``STEADY_S`` (at most ``STEADY_MAX_S``); the seconds it took."""
    started = time.monotonic()
    full = _open_file_limit(pid) - FULL_MARGIN
    most, since = _descriptors(pid), time.monotonic()
    while most < full and time.monotonic() - since < STEADY_S and time.monotonic() - started < STEADY_MAX_S:
        await asyncio.sleep(0.5)
        now = _descriptors(pid)
        if now > most:
            most, since = now, time.monotonic()
    return time.monotonic() - started


def _open_file_hard_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


async def idle_sockets(target: Target) -> Outcome:
    """4a: the flood of idle connections, held ``hold_s`` while the other tenant polls."""
    hard = _open_file_hard_limit()
    total = target.sizes.idle_sockets or hard + 100
    per_process = max(1, hard - SPARE_FILES)
    port = int(target.base.rsplit(":", 1)[1])
    context = multiprocessing.get_context("spawn")
    release = context.Event()
    children = []
    for start in range(0, total, per_process):
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=hold_idle, args=(port, min(per_process, total - start), sender, release))
        process.start()
        children.append((process, receiver))
    opened = 0
    for _, receiver in children:
        opened += await asyncio.to_thread(receiver.recv)
    taken_s = await _until_taken(target.api_pid)
    await asyncio.sleep(target.sizes.hold_s)
    release.set()
    seen: dict[str, int] = {}
    for process, receiver in children:
        for name, n in (await asyncio.to_thread(receiver.recv)).items():
            seen[name] = seen.get(name, 0) + n
        await asyncio.to_thread(process.join)
    shown = ", ".join(f"{name} {n:,}" for name, n in seen.items() if n)
    return Outcome(
        f"{opened:,} opened, taken by the API in {taken_s:.0f} s; {target.sizes.hold_s:g} s later: {shown}",
        details={"sockets": total, "steady_after_s": round(taken_s, 1), **seen},
    )


async def _answer(reader: asyncio.StreamReader, timeout_s: float) -> str:
    """What the server did once the request was sent or cut off: its status line, ``closed by the server``,
    ``reset``, or ``""`` (nothing within ``timeout_s``: the connection is still open)."""
    try:
        answer = await asyncio.wait_for(reader.read(200), timeout=timeout_s)
    except TimeoutError:
        return ""
    except OSError:
        return "reset"
    return answer.split(b"\r\n", 1)[0].decode(errors="replace") if answer else "closed by the server"


async def _unfinished_head(port: int, mib: int, hold_s: float) -> tuple[float, str]:
    """One head of ``mib`` MiB that never ends: the MiB the server took, and how it ended."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    _linger_off(writer.get_extra_info("socket"))
    chunk = b"a" * MIB
    sent = 0
    ending = "held open"
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nX-Filler: ")
        for _ in range(mib):
            writer.write(chunk)
            await writer.drain()
            sent += 1
        await asyncio.sleep(hold_s)
        ending = await _answer(reader, 0.5) or ending
    except OSError as exc:
        ending = f"cut off ({type(exc).__name__}) {await _answer(reader, 0.5)}".strip()
    finally:
        writer.close()
    return sent, ending


async def unfinished_heads(target: Target) -> Outcome:
    """4b: ``header_connections`` unfinished heads of ``header_mib`` MiB at once."""
    sizes = target.sizes
    port = int(target.base.rsplit(":", 1)[1])
    ends = await asyncio.gather(
        *(_unfinished_head(port, sizes.header_mib, sizes.hold_s) for _ in range(sizes.header_connections))
    )
    sent = sum(mib for mib, _ in ends)
    endings = sorted({ending for _, ending in ends})
    return Outcome(f"{sent:g} MiB taken of {sizes.header_connections * sizes.header_mib}; {', '.join(endings)}")


async def big_header(target: Target) -> Outcome:
    """4c: one complete request whose header is ``big_header_mib`` MiB: the status it gets."""
    port = int(target.base.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    _linger_off(writer.get_extra_info("socket"))
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nX-Big: ")
        writer.write(b"a" * (target.sizes.big_header_mib * MIB))
        writer.write(b"\r\nConnection: close\r\n\r\n")
        await writer.drain()
        got = await _answer(reader, target.sizes.attack_timeout_s) or "no answer"
    except OSError as exc:
        got = f"cut off ({type(exc).__name__}) {await _answer(reader, 0.5)}".strip()
    finally:
        writer.close()
    return Outcome(got)
