"""The dead-letter stream: jobs failed for good and malformed entries, parked with their reason.

Operators list them, retry the ones worth retrying (after fixing the cause), and purge the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from broker.keys import RedisKeys
from broker.scripts import RequeueScript
from contract.errors import InvalidJobError, JobNotFoundError, MalformedEntryError
from contract.settings import Settings
from contract.wire import decode_job_entry


@dataclass(frozen=True, slots=True)
class DeadLetterEntry:
    """One parked entry."""

    dead_id: str
    job_id: str | None
    reason: str
    parked_at: float | None
    fields: dict[str, str]


class DeadLetters:
    """List, retry and purge the dead-letter stream of one deployment."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self._redis = client
        self._settings = settings
        self._keys = RedisKeys.from_settings(settings)
        self._requeue = RequeueScript(self._keys, settings.state_ttl_seconds)

    def entries(self, count: int = 100) -> list[DeadLetterEntry]:
        """The oldest ``count`` parked entries."""
        return [_entry(dead_id, fields) for dead_id, fields in self._range(count=count)]

    def retry(self, ident: str) -> str:
        """Queue a parked job again (by dead-letter entry id or job id) and return its job id.

        The job keeps its id; its state goes back to ``queued`` with no attempts, and the entry
        leaves the dead-letter stream, all in one script: two retries of the same entry at once
        queue it once. A malformed entry cannot be retried: its producer has to send a correct one.
        """
        found = self._find(ident)
        try:
            spec = decode_job_entry(found.fields, max_chars=self._settings.max_text_chars)
        except MalformedEntryError as exc:
            raise InvalidJobError(f"dead letter {found.dead_id} cannot be retried: {exc}") from None
        self._requeue.call(self._redis, found.dead_id, spec, found.fields, time.time())
        return spec.job_id

    def purge(self) -> int:
        """Delete every parked entry; return how many there were."""
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.xlen(self._keys.dead_letter_stream)
            pipe.delete(self._keys.dead_letter_stream)
            count, _ = pipe.execute()
        return int(count)

    def _find(self, ident: str) -> DeadLetterEntry:
        ident = ident.strip()
        if "-" in ident and ident.replace("-", "").isdigit():
            for dead_id, fields in self._range(low=ident, high=ident):
                return _entry(dead_id, fields)
        else:
            for dead_id, fields in self._range():
                if fields.get("id") == ident:
                    return _entry(dead_id, fields)
        raise JobNotFoundError(f"no dead letter {ident!r} (use `dragoman dead list`)")

    def _range(self, low: str = "-", high: str = "+", count: int | None = None) -> list[tuple[str, dict[str, str]]]:
        entries: Any = self._redis.xrange(self._keys.dead_letter_stream, min=low, max=high, count=count)
        return [(str(dead_id), dict(fields)) for dead_id, fields in entries]


def _entry(dead_id: str, fields: dict[str, str]) -> DeadLetterEntry:
    parked = fields.get("parked_at")
    return DeadLetterEntry(
        dead_id=dead_id,
        job_id=fields.get("id"),
        reason=fields.get("reason", ""),
        parked_at=float(parked) if parked else None,
        fields=dict(fields),
    )
