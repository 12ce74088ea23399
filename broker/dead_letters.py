"""The dead-letter stream: jobs failed for good and malformed entries, each with the reason it became a dead letter.

Operators list them, retry the ones worth retrying (after fixing the cause), and purge the rest.
The operations are coroutines on an asyncio client, as every other Redis operation of this
package; the CLI's ``dragoman dead`` runs them through ``contract/sync_bridge.py``.
"""

from __future__ import annotations

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
    """One dead letter: its entry id, the job it was (if it had an id), why, when, and its fields."""

    dead_id: str
    job_id: str | None
    reason: str
    dead_lettered_at: float | None
    fields: dict[str, str]


class DeadLetters:
    """List, retry and purge the dead-letter stream of one deployment."""

    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._redis = client
        self._settings = settings
        self._keys = RedisKeys.from_settings(settings)
        self._requeue = RequeueScript(self._keys, settings.state_ttl_seconds)

    async def entries(self, count: int = 100) -> list[DeadLetterEntry]:
        """The oldest ``count`` dead letters."""
        return [_entry(dead_id, fields) for dead_id, fields in await self._range(count=count)]

    async def retry(self, ident: str) -> str:
        """Queue a dead-lettered job again (by dead-letter entry id or job id) and return its job id.

        The job keeps its id; its state goes back to ``queued`` with no attempts, and the entry
        leaves the dead-letter stream, all in one script: two retries of the same entry at once
        queue it once. A malformed entry cannot be retried: its producer has to send a correct one.
        """
        found = await self._find(ident)
        try:
            spec = decode_job_entry(found.fields, max_chars=self._settings.max_text_chars)
        except MalformedEntryError as exc:
            raise InvalidJobError(f"dead letter {found.dead_id} cannot be retried: {exc}") from None
        await self._requeue.call(self._redis, found.dead_id, spec, found.fields, time.time())
        return spec.job_id

    async def purge(self) -> int:
        """Delete every dead letter; return how many there were."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xlen(self._keys.dead_letter_stream)
            pipe.delete(self._keys.dead_letter_stream)
            count, _ = await pipe.execute()
        return int(count)

    async def _find(self, ident: str) -> DeadLetterEntry:
        ident = ident.strip()
        if "-" in ident and ident.replace("-", "").isdigit():
            for dead_id, fields in await self._range(low=ident, high=ident):
                return _entry(dead_id, fields)
        else:
            for dead_id, fields in await self._range():
                if fields.get("id") == ident:
                    return _entry(dead_id, fields)
        raise JobNotFoundError(f"no dead letter {ident!r} (use `dragoman dead list`)")

    async def _range(
        self, low: str = "-", high: str = "+", count: int | None = None
    ) -> list[tuple[str, dict[str, str]]]:
        entries: Any = await self._redis.xrange(self._keys.dead_letter_stream, min=low, max=high, count=count)
        return [(str(dead_id), dict(fields)) for dead_id, fields in entries]


def _entry(dead_id: str, fields: dict[str, str]) -> DeadLetterEntry:
    when = fields.get(DEAD_LETTERED_AT) or fields.get(_OLD_DEAD_LETTERED_AT)
    return DeadLetterEntry(
        dead_id=dead_id,
        job_id=fields.get("id"),
        reason=fields.get("reason", ""),
        dead_lettered_at=float(when) if when else None,
        fields=dict(fields),
    )
