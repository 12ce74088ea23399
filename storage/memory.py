"""The ``translation_memory`` table: exact-match translations keyed by everything that decides them.

The worker looks a whole read up in one statement (which also counts the hits), stores new
translations in chunks, and trims the table by age and size; ``dragoman memory`` reads its
statistics and purges it. The key is computed by the worker (``worker/memory_keys.py``): this
module only stores bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from contract.errors import DragomanError
from storage.connection import AsyncPostgresConnection, DatabaseUnavailableError

# Reads and counts in one statement: the hit's row is touched so that the size trim keeps it.
_RECALL_SQL = """
UPDATE translation_memory SET hits = hits + 1, last_used_at = now()
WHERE key = ANY(%s::bytea[])
RETURNING key, translation, prompt_tokens, output_tokens
"""

_STORE_SQL = """
INSERT INTO translation_memory (key, tenant, model, profile, source_lang, target_lang, source_text, translation,
                                prompt_tokens, output_tokens)
SELECT decode(u.key, 'hex'), u.tenant, u.model, u.profile, u.source_lang, u.target_lang, u.source_text,
       u.translation, u.prompt_tokens, u.output_tokens
FROM json_to_recordset(%s::json)
     AS u(key text, tenant text, model text, profile text, source_lang text, target_lang text, source_text text,
          translation text, prompt_tokens int, output_tokens int)
ON CONFLICT (key) DO NOTHING
"""

_EXPIRE_SQL = "DELETE FROM translation_memory WHERE created_at < now() - make_interval(secs => %s)"

# The size trim deletes the least recently used rows past the limit, a bounded number per call.
_TRIM_SQL = """
DELETE FROM translation_memory WHERE key IN (
    SELECT key FROM translation_memory ORDER BY last_used_at DESC OFFSET %s LIMIT %s
)
"""

_STATS_SQL = """
SELECT tenant, model, profile, count(*), coalesce(sum(hits), 0),
       coalesce(sum(octet_length(source_text) + octet_length(translation)), 0),
       min(created_at), max(last_used_at)
FROM translation_memory WHERE %s::text IS NULL OR tenant = %s::text
GROUP BY tenant, model, profile ORDER BY tenant, model, profile
"""


class MemoryStoreError(DragomanError):
    """PostgreSQL refused a translation-memory statement for a reason other than being unreachable."""


class MemoryEntry(msgspec.Struct, frozen=True):
    """One translation to remember (the field names are the recordset's columns; ``key`` in hex)."""

    key: str
    model: str
    profile: str
    source_lang: str
    target_lang: str
    source_text: str
    translation: str
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    tenant: str = ""
    """Whose memory the entry is in ('' for jobs without a tenant, and for every job of a shared memory)."""


class RecalledTranslation(NamedTuple):
    """A stored translation found for a key."""

    translation: str
    prompt_tokens: int | None
    output_tokens: int | None


class MemoryStats(NamedTuple):
    """What ``dragoman memory stats`` shows for one (tenant, model, profile)."""

    tenant: str
    model: str
    profile: str
    entries: int
    hits: int
    text_bytes: int
    oldest: datetime | None
    last_used: datetime | None


_encode = msgspec.json.Encoder().encode


def _encoded(data: bytes) -> bytes:
    return data


class MemoryStore:
    """The worker's and the CLI's access to ``translation_memory``, on one async connection.

    Owned by one task at a time; a worker keeps one for its lookups and another for its writes.
    Every method raises :class:`DatabaseUnavailableError` when PostgreSQL cannot be reached.
    """

    def __init__(self, database_url: str) -> None:
        self._connection = AsyncPostgresConnection(database_url)

    async def recall(self, keys: Sequence[bytes]) -> dict[bytes, RecalledTranslation]:
        """The stored translations of ``keys`` (missing keys are absent), each hit counted."""
        if not keys:
            return {}
        rows = await self._execute(_RECALL_SQL, (list(keys),), fetch=True)
        return {bytes(key): RecalledTranslation(text, prompt, output) for key, text, prompt, output in rows}

    async def store(self, entries: Sequence[MemoryEntry]) -> None:
        """Insert ``entries`` in one statement; a key already stored keeps its first translation."""
        if not entries:
            return
        from psycopg.types.json import Json

        await self._execute(_STORE_SQL, (Json(_encode(list(entries)), dumps=_encoded),))

    async def expire(self, max_age_seconds: float) -> int:
        """Delete entries created more than ``max_age_seconds`` ago; return how many."""
        return await self._count(_EXPIRE_SQL, (max_age_seconds,))

    async def trim(self, max_entries: int, most: int = 10_000) -> int:
        """Delete up to ``most`` of the least recently used entries past ``max_entries``; return how many."""
        return await self._count(_TRIM_SQL, (max_entries, most))

    async def stats(self, *, tenant: str | None = None) -> list[MemoryStats]:
        """Entries, hits and text size per tenant, model and profile (only ``tenant``'s, given one; '' is no tenant)."""
        rows = await self._execute(_STATS_SQL, (tenant, tenant), fetch=True)
        return [MemoryStats(t, m, p, int(n), int(h), int(b), oldest, used) for t, m, p, n, h, b, oldest, used in rows]

    async def purge(
        self, *, model: str | None = None, older_than_seconds: float | None = None, tenant: str | None = None
    ) -> int:
        """Delete every entry, or those of ``tenant`` ('' is no tenant), ``model`` and/or created more than
        ``older_than_seconds`` ago."""
        conditions: list[str] = []
        params: list[Any] = []
        if tenant is not None:
            conditions.append("tenant = %s")
            params.append(tenant)
        if model is not None:
            conditions.append("model = %s")
            params.append(model)
        if older_than_seconds is not None:
            conditions.append("created_at < now() - make_interval(secs => %s)")
            params.append(older_than_seconds)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return await self._count(f"DELETE FROM translation_memory{where}", tuple(params))

    async def close(self) -> None:
        """Close the connection."""
        await self._connection.close()

    async def _count(self, sql: str, params: tuple[Any, ...]) -> int:
        rowcount, _ = await self._run(sql, params, fetch=False)
        return rowcount

    async def _execute(self, sql: str, params: tuple[Any, ...], *, fetch: bool = False) -> list[tuple[Any, ...]]:
        _, rows = await self._run(sql, params, fetch=fetch)
        return rows

    async def _run(self, sql: str, params: tuple[Any, ...], *, fetch: bool) -> tuple[int, list[tuple[Any, ...]]]:
        import psycopg

        try:
            conn = await self._connection.get()
            cursor = await conn.execute(sql, params)
            rows = list(await cursor.fetchall()) if fetch else []
            return int(cursor.rowcount), rows
        except psycopg.OperationalError as exc:
            await self._connection.close()
            raise DatabaseUnavailableError.from_driver(exc) from exc
        except psycopg.Error as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise MemoryStoreError(
                f"the translation memory refused a statement ({reason}); "
                "if the table is missing, run `dragoman migrate`"
            ) from exc
