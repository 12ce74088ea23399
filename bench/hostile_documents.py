"""The attacks of ``bench.hostile_api`` through documents and webhooks (issue 48, items 3 and 5).

- the queued-job limit: a key limited to 5 unfinished jobs sends a document of ``limited_paragraphs``
  segments, then ``limited_documents`` more at once; counted: the segments that were queued (their job
  rows, and those still unfinished in Redis at the end), and the most unfinished at once (sampled);
- documents by turns: the attacker's ``large_documents`` documents of ``large_paragraphs`` segments, then the
  other tenant's document of 2 paragraphs: the seconds until it is completed;
- webhooks by turns: ``dead_webhooks`` documents of the attacker's whose receiver accepts the connection
  and never answers, then the other tenant's small document with a receiver that answers: the seconds from
  its completion to its webhook.

Each ends by cancelling what of the attacker's is left (and closing the dead receiver), so that the
next attack meets an idle orchestrator.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
import psycopg
import redis.asyncio as aioredis

from bench.hostile_target import Key, Outcome, Target, bearer, counted, send, session
from broker.keys import RedisKeys
from contract.settings import Settings
from storage import libpq_url

FINAL = {"completed", "failed", "cancelled"}
POLL_S = 0.1
SAMPLE_S = 0.02


def paragraphs(count: int, word: str = "Paragraph") -> bytes:
    """A text document of ``count`` paragraphs: ``count`` segments."""
    return "".join(f"{word} number {n} of the document.\n\n" for n in range(count)).encode()


async def submit(http: aiohttp.ClientSession, key: Key, body: bytes, callback_url: str | None = None) -> str | None:
    """``POST /v1/documents`` (txt, en -> fr): the document's id, or ``None`` if it was refused (its status then
    in the ``refused`` attribute of the outcome the caller builds)."""
    params = {"source_lang": "en", "target_lang": "fr", "format": "txt"}
    if callback_url:
        params["callback_url"] = callback_url
    status, _, answer = await send(http, "POST", "/v1/documents", params=params, data=body, headers=bearer(key))
    return str(answer["id"]) if status == "202" and isinstance(answer, dict) else None


async def view(http: aiohttp.ClientSession, key: Key, document_id: str) -> dict[str, Any]:
    """``GET /v1/documents/{id}``'s answer (``{"status": "HTTP <code>"}`` if it was not a 200)."""
    status, _, answer = await send(http, "GET", f"/v1/documents/{document_id}", headers=bearer(key))
    return answer if status == "200" and isinstance(answer, dict) else {"status": f"HTTP {status}"}


async def status_of(http: aiohttp.ClientSession, key: Key, document_id: str) -> str:
    """The document's status (or the error the API answered)."""
    return str((await view(http, key, document_id))["status"])


async def until_final(http: aiohttp.ClientSession, key: Key, ids: Iterable[str], within_s: float) -> dict[str, str]:
    """Each document's status once every one is final, or at ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        statuses = {document_id: await status_of(http, key, document_id) for document_id in ids}
        if all(status in FINAL for status in statuses.values()) or time.monotonic() > deadline:
            return statuses
        await asyncio.sleep(POLL_S * 5)


async def cancel_all(http: aiohttp.ClientSession, key: Key, ids: Iterable[str], within_s: float) -> dict[str, str]:
    """Cancel what of ``ids`` is not final; their statuses once final (or at ``within_s``)."""
    ids = list(ids)
    for document_id in ids:
        await send(http, "POST", f"/v1/documents/{document_id}/cancel", headers=bearer(key))
    return await until_final(http, key, ids, within_s)


async def _unfinished(target: Target, tenant: str) -> int:
    keys = RedisKeys.from_settings(Settings(redis_url=target.redis_url, key_prefix=target.key_prefix))
    client = aioredis.Redis.from_url(target.redis_url)
    try:
        return int(await client.zcard(keys.tenant_queued(tenant)))
    finally:
        await client.aclose()


async def _job_rows(target: Target, tenant: str) -> int:
    async with await psycopg.AsyncConnection.connect(libpq_url(target.database_url)) as conn:
        row = await (await conn.execute("SELECT count(*) FROM jobs WHERE tenant = %s", (tenant,))).fetchone()
    return int(row[0]) if row else 0


async def _sample_peak(target: Target, tenant: str, peak: list[int]) -> None:
    """Keep ``peak[0]`` the most unfinished jobs of ``tenant`` seen, sampling every ``SAMPLE_S`` until cancelled."""
    keys = RedisKeys.from_settings(Settings(redis_url=target.redis_url, key_prefix=target.key_prefix))
    client = aioredis.Redis.from_url(target.redis_url)
    try:
        while True:
            peak[0] = max(peak[0], int(await client.zcard(keys.tenant_queued(tenant))))
            await asyncio.sleep(SAMPLE_S)
    finally:
        await client.aclose()


async def queued_limit(target: Target) -> Outcome:
    """3: documents of a key limited to 5 unfinished jobs: how many of their segments were queued."""
    sizes = target.sizes
    key = target.limited
    body = paragraphs(sizes.limited_paragraphs)
    peak = [0]
    sampler = asyncio.create_task(_sample_peak(target, key.tenant, peak))
    try:
        async with session(target) as http:
            first = await submit(http, key, body)
            rest = await asyncio.gather(*(submit(http, key, body) for _ in range(sizes.limited_documents)))
            ids = [document_id for document_id in (first, *rest) if document_id]
            statuses = await until_final(http, key, ids, sizes.settle_s)
            left = await _unfinished(target, key.tenant)
            await cancel_all(http, key, ids, sizes.settle_s)
    finally:
        sampler.cancel()
    queued = await _job_rows(target, key.tenant) + left
    refused = 1 + sizes.limited_documents - len(ids)
    return Outcome(
        f"{len(ids)} accepted, {refused} refused; {queued:,} segments queued (at most {peak[0]:,} at once); "
        f"documents {counted(list(statuses.values()))}",
        details={"queued": queued, "peak_unfinished": peak[0], "statuses": statuses, "refused": refused},
    )


async def document_turns(target: Target) -> Outcome:
    """5a: the attacker's large documents first, then the other tenant's small one: its time to completed."""
    sizes = target.sizes
    async with session(target) as http:
        large = paragraphs(sizes.large_paragraphs, "Attacker")
        ids = [await submit(http, target.attacker, large) for _ in range(sizes.large_documents)]
        started = time.monotonic()
        small = await submit(http, target.victim, paragraphs(2, "Victim"))
        done = await until_final(http, target.victim, [small] if small else [], sizes.settle_s)
        seconds = time.monotonic() - started
        ends = await cancel_all(http, target.attacker, [i for i in ids if i], sizes.settle_s)
    outcome = next(iter(done.values()), "refused")
    return Outcome(
        f"{sum(1 for i in ids if i)} of {len(ids)} accepted; then {counted(list(ends.values()))}",
        measure=f"small document {outcome} after {seconds:.1f} s",
        details={"small_document_s": round(seconds, 3), "small_document": outcome},
    )


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: one that answers 200 and notes when each delivery came, or one that
    accepts the connection and never answers (``dead``)."""

    dead: bool
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self) -> str:
        """Listen; the URL deliveries go to."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/hook"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        if self.dead:
            return  # the connection stays open, unanswered, until close()
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            body = await reader.readexactly(length)
            self.arrivals.append((time.time(), body.decode(errors="replace")))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        """Stop listening and drop every connection (later deliveries are refused at once)."""
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()

    @property
    def connections(self) -> int:
        """Connections it has taken so far."""
        return len(self._writers)

    def arrival_of(self, document_id: str) -> float | None:
        """When the delivery naming ``document_id`` came (Unix seconds; ``None``: not yet)."""
        return next((at for at, body in self.arrivals if document_id in body), None)


async def webhook_turns(target: Target) -> Outcome:
    """5b: the attacker's documents with a receiver that never answers, then the other tenant's small document
    with one that does: the seconds from its completion to its webhook."""
    sizes = target.sizes
    dead, live = Receiver(dead=True), Receiver(dead=False)
    dead_url, live_url = await dead.start(), await live.start()
    try:
        async with session(target) as http:
            ids = [
                await submit(http, target.attacker, paragraphs(1, "Attacker"), dead_url)
                for _ in range(sizes.dead_webhooks)
            ]
            theirs = await until_final(http, target.attacker, [i for i in ids if i], sizes.settle_s)
            small = await submit(http, target.victim, paragraphs(1, "Victim"), live_url)
            done = await until_final(http, target.victim, [small] if small else [], sizes.settle_s)
            finished = await view(http, target.victim, small) if small else {}
            wait_s = sizes.settle_s + sizes.dead_webhooks * sizes.webhook_timeout_s
            deadline = time.monotonic() + wait_s
            while small and live.arrival_of(small) is None and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
    finally:
        await dead.close()
        await live.close()
    arrived = live.arrival_of(small) if small else None
    completed_at = finished.get("completed_at")
    delay_s = arrived - datetime.fromisoformat(completed_at).timestamp() if arrived and completed_at else None
    delay = f"{delay_s:.1f} s after it completed" if delay_s is not None else f"not in {wait_s:.0f} s"
    return Outcome(
        f"{sum(1 for i in ids if i)} documents {counted(list(theirs.values()))}, {dead.connections} deliveries held",
        measure=f"small document {next(iter(done.values()), 'refused')}; its webhook {delay}",
        details={"webhook_delay_s": round(delay_s, 3) if delay_s is not None else None},
    )
