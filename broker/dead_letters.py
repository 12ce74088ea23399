"""The dead-letter stream: jobs failed for good and malformed entries, each with the reason it became a dead letter.

Operators list them, retry the ones worth retrying (after fixing the cause), and purge the rest.
The operations are coroutines on an asyncio client, as every other Redis operation of this
package; the CLI's ``dragoman dead`` runs them through ``contract/sync_bridge.py``.

Each shard has its own dead-letter stream (``DRAGOMAN_REDIS_SHARDS``; a worker dead-letters an
entry on the shard it read it from). Listing merges every shard's, oldest first, each entry with
its shard; a retry runs REQUEUE on the dead letter's own shard, whose lane takes the job again;
purging empties every shard's. Entry ids are per stream, so two shards may hold the same one: a
retry by entry id then needs the shard, written ``<shard>/<entry id>`` (``dragoman dead list``
shows dead letters so when there are several shards).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.keys import RedisKeys
from broker.scripts import RequeueScript
from contract.errors import InvalidJobError, JobNotFoundError, MalformedEntryError
from contract.settings import Settings
from contract.wire import decode_job_entry

if TYPE_CHECKING:
    import redis.asyncio as aioredis

DEAD_LETTERED_AT = "dead_lettered_at"
"""The entry field holding when the job became a dead letter (Unix seconds), as the worker writes it."""

_OLD_DEAD_LETTERED_AT = "parked_at"
"""The same field as earlier workers named it: entries already in a stream keep it, and are read alike."""


@dataclass(frozen=True, slots=True)
class DeadLetterEntry:
    """One dead letter: its entry id, the job it was (if it had an id), why, when, its fields and its shard."""

    dead_id: str
    job_id: str | None
    reason: str
    dead_lettered_at: float | None
    fields: dict[str, str]
    shard: int = 0

    @property
    def ident(self) -> str:
        """What names it for a retry: its entry id, ``<shard>/<entry id>`` on a shard after the first."""
        return self.dead_id if self.shard == 0 else f"{self.shard}/{self.dead_id}"


class DeadLetters:
    """List, retry and purge the dead-letter streams of one deployment (every shard's)."""

    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._redis = client
        self._settings = settings
        self._keys = RedisKeys.from_settings(settings)

    async def entries(self, count: int = 100) -> list[DeadLetterEntry]:
        """The oldest ``count`` dead letters of every shard together (by entry id: when each was written)."""
        streams = await asyncio.gather(*(self._range(shard, count=count) for shard in range(self._keys.shard_count)))
        merged = heapq.merge(*streams, key=lambda entry: _id_order(entry.dead_id))
        return [entry for _, entry in zip(range(count), merged, strict=False)]

    async def retry(self, ident: str) -> str:
        """Queue a dead-lettered job again (by dead-letter entry id or job id) and return its job id.

        The job keeps its id; its state goes back to ``queued`` with no attempts, and the entry
        leaves the dead-letter stream, all in one script: two retries of the same entry at once
        queue it once. A malformed entry cannot be retried: its producer has to send a correct one.
        """
        found = await self._find(ident)
        try:
            spec = decode_job_entry(found.fields, max_chars=self._settings.max_job_text_chars)
        except MalformedEntryError as exc:
            raise InvalidJobError(f"dead letter {found.ident} cannot be retried: {exc}") from None
        # REQUEUE's keys (this dead-letter stream, a lane, the job's state record, its tenant's set) must share
        # one shard's tag, so it runs on the dead letter's shard and the job goes back on that shard's lane. That
        # is the job's own shard (keys.shard_of) whenever its worker dead-lettered it on the shard it read it
        # from, as workers do. A job id that hashes to another shard (a deployment whose DRAGOMAN_REDIS_SHARDS
        # changed since, or a producer that placed it elsewhere) is requeued here all the same, where workers
        # read it: only a lookup of its state by id (which looks on its hashed shard) misses it until it ends.
        keys = self._keys.for_shard(found.shard)
        requeue = RequeueScript(keys, self._settings.state_ttl_seconds)
        await requeue.call(self._redis, found.dead_id, spec, found.fields, time.time())
        return spec.job_id

    async def purge(self) -> int:
        """Delete every dead letter of every shard; return how many there were."""
        counts = await asyncio.gather(*(self._purge(keys) for keys in self._keys.shards))
        return sum(counts)

    async def _purge(self, keys: RedisKeys) -> int:
        """One shard's: its count and the deletion in one MULTI/EXEC (one key: one slot)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xlen(keys.dead_letter_stream)
            pipe.delete(keys.dead_letter_stream)
            count, _ = await pipe.execute()
        return int(count)

    async def _find(self, ident: str) -> DeadLetterEntry:
        """The dead letter ``ident`` names: ``[<shard>/]<entry id>``, or a job id (its own shard's looked at first)."""
        ident = ident.strip()
        shard_text, slash, entry_id = ident.rpartition("/")
        if _is_entry_id(entry_id) and (not slash or shard_text.isdigit()):
            shards = [int(shard_text)] if slash else list(range(self._keys.shard_count))
            if any(not 0 <= shard < self._keys.shard_count for shard in shards):
                raise JobNotFoundError(f"no dead letter {ident!r}: this deployment has {self._keys.shard_count} shards")
            found = [entry for shard in shards for entry in await self._range(shard, low=entry_id, high=entry_id)]
            if len(found) > 1:
                raise InvalidJobError(
                    f"dead letter id {entry_id} is on shards {', '.join(str(e.shard) for e in found)}: retry "
                    f"{found[0].shard}/{entry_id} or {found[1].shard}/{entry_id}, naming its shard"
                )
        else:
            home = self._keys.shard_of(ident)
            shards = [home, *(n for n in range(self._keys.shard_count) if n != home)]
            found = []
            for shard in shards:
                found = [entry for entry in await self._range(shard) if entry.job_id == ident][:1]
                if found:
                    break
        if not found:
            raise JobNotFoundError(f"no dead letter {ident!r} (use `dragoman dead list`)")
        return found[0]

    async def _range(
        self, shard: int, low: str = "-", high: str = "+", count: int | None = None
    ) -> list[DeadLetterEntry]:
        """Shard ``shard``'s dead letters from ``low`` to ``high`` (entry ids), oldest first."""
        stream = self._keys.for_shard(shard).dead_letter_stream
        entries: Any = await self._redis.xrange(stream, min=low, max=high, count=count)
        return [_entry(str(dead_id), dict(fields), shard) for dead_id, fields in entries]


def _is_entry_id(text: str) -> bool:
    """Whether ``text`` is a stream entry id (``<ms>-<seq>``), not a job id."""
    ms, dash, seq = text.partition("-")
    return bool(dash) and ms.isdigit() and seq.isdigit()


def _id_order(dead_id: str) -> tuple[int, int]:
    """An entry id as a sortable pair (milliseconds, sequence)."""
    ms, _, seq = dead_id.partition("-")
    return int(ms), int(seq or 0)


def _entry(dead_id: str, fields: dict[str, str], shard: int = 0) -> DeadLetterEntry:
    when = fields.get(DEAD_LETTERED_AT) or fields.get(_OLD_DEAD_LETTERED_AT)
    return DeadLetterEntry(
        dead_id=dead_id,
        job_id=fields.get("id"),
        reason=fields.get("reason", ""),
        dead_lettered_at=float(when) if when else None,
        fields=dict(fields),
        shard=shard,
    )
