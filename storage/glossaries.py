"""The ``glossaries`` table: a tenant's named term lists for one language pair (the DeepL-compatible door).

A glossary is created whole and never edited (DeepL's v2 glossaries are immutable): its entries are
one JSONB array of ``[source, target]`` pairs in the order they were given, read whole when a
translation names it. Every read and the delete are scoped to one tenant: another tenant's id is
the same as an unknown one.

A tenant's glossaries are held to a quota (:class:`GlossaryQuota`: how many, and the bytes of their
terms, ``entry_bytes``), checked where every glossary is stored, :meth:`GlossaryStore.create`: under
the tenant's advisory lock, in the transaction that inserts the glossary, so two creates at once
cannot both take the last place (the second waits for the first's commit and counts it).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contract.errors import DragomanError
from storage.connection import AsyncConnectionPool

_INFO_COLUMNS = "id, name, source_lang, target_lang, entry_count, created_at"


@dataclass(frozen=True, slots=True)
class GlossaryInfo:
    """A stored glossary without its entries: what a listing shows."""

    id: str
    name: str
    source_lang: str
    target_lang: str
    entry_count: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Glossary:
    """A stored glossary with its entries, ``(source term, target term)`` in the order they were given."""

    info: GlossaryInfo
    entries: list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class GlossaryQuota:
    """What one tenant's glossaries may take together: how many, and the UTF-8 bytes of all their terms."""

    max_count: int
    max_bytes: int


class GlossaryQuotaExceededError(DragomanError):
    """A new glossary would take its tenant past its quota (:class:`GlossaryQuota`); nothing was stored."""


def entry_bytes(entries: list[tuple[str, str]]) -> int:
    """The UTF-8 bytes of ``entries``' source and target terms: what a glossary counts against the byte quota."""
    return sum(len(source.encode()) + len(target.encode()) for source, target in entries)


def _info(row: tuple[Any, ...]) -> GlossaryInfo:
    return GlossaryInfo(*row)


class GlossaryStore:
    """Create, list, read and delete one tenant's glossaries on a connection pool (the API's), within ``quota``."""

    def __init__(self, pool: AsyncConnectionPool, quota: GlossaryQuota) -> None:
        self._pool = pool
        self.quota = quota

    async def create(
        self, tenant: str, name: str, source_lang: str, target_lang: str, entries: list[tuple[str, str]]
    ) -> GlossaryInfo:
        """Store a new glossary of ``tenant`` (entries already validated); its info, with a fresh id.

        Raises :class:`GlossaryQuotaExceededError` if the tenant's glossaries, this one with them, would be more
        than the quota allows, in number or in bytes (checked under the tenant's lock: see the module's docstring).
        """
        glossary_id = str(uuid.uuid4())
        size = entry_bytes(entries)
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('dragoman.glossaries:' || %s, 0))", (tenant,)
            )
            cursor = await conn.execute(
                "SELECT count(*), COALESCE(sum(entry_bytes), 0) FROM glossaries WHERE tenant = %s", (tenant,)
            )
            counted = await cursor.fetchone()
            count, used = (int(counted[0]), int(counted[1])) if counted else (0, 0)
            self._check_quota(count, used, size)
            cursor = await conn.execute(
                "INSERT INTO glossaries "
                "(id, tenant, name, source_lang, target_lang, entries, entry_count, entry_bytes) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_INFO_COLUMNS}",
                (glossary_id, tenant, name, source_lang, target_lang, json.dumps(entries), len(entries), size),
            )
            row = await cursor.fetchone()
        assert row is not None  # an INSERT ... RETURNING returns its row
        return _info(row)

    def _check_quota(self, count: int, used: int, size: int) -> None:
        """Refuse a glossary of ``size`` bytes beside ``count`` stored ones of ``used`` bytes, if past the quota."""
        quota = self.quota
        if count + 1 > quota.max_count:
            raise GlossaryQuotaExceededError(
                f"you have {count:,} glossaries, the most your quota allows (DRAGOMAN_GLOSSARY_QUOTA_COUNT="
                f"{quota.max_count:,}); delete one you no longer need (DELETE /v2/glossaries/{{glossary_id}}) and retry"
            )
        if used + size > quota.max_bytes:
            raise GlossaryQuotaExceededError(
                f"this glossary's terms are {size:,} bytes and would take your glossaries to {used + size:,} bytes, "
                f"over your quota of {quota.max_bytes:,} (DRAGOMAN_GLOSSARY_QUOTA_BYTES); delete glossaries you no "
                "longer need (DELETE /v2/glossaries/{glossary_id}) and retry"
            )

    async def usage(self, tenant: str) -> tuple[int, int]:
        """How many glossaries ``tenant`` has, and the bytes of their terms."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*), COALESCE(sum(entry_bytes), 0) FROM glossaries WHERE tenant = %s", (tenant,)
            )
            row = await cursor.fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def check_room(self, tenant: str) -> None:
        """Raise :class:`GlossaryQuotaExceededError` if ``tenant`` has no room for one more glossary of any size.

        A cheap early answer, before a glossary's entries are read: :meth:`create` checks again, exactly.
        """
        count, used = await self.usage(tenant)
        self._check_quota(count, used, 1)

    async def list(self, tenant: str) -> list[GlossaryInfo]:
        """``tenant``'s glossaries, oldest first, without their entries."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM glossaries WHERE tenant = %s ORDER BY created_at, id", (tenant,)
            )
            rows = await cursor.fetchall()
        return [_info(row) for row in rows]

    async def get(self, tenant: str, glossary_id: str) -> Glossary | None:
        """``tenant``'s glossary ``glossary_id`` with its entries; ``None`` if unknown or another tenant's."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_INFO_COLUMNS}, entries FROM glossaries WHERE tenant = %s AND id = %s",
                (tenant, glossary_id),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        entries = row[-1]
        if isinstance(entries, str):  # a connection without the JSON loader answers text
            entries = json.loads(entries)
        return Glossary(_info(row[:-1]), [(str(source), str(target)) for source, target in entries])

    async def delete(self, tenant: str, glossary_id: str) -> bool:
        """Delete ``tenant``'s glossary ``glossary_id``; whether there was one."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute("DELETE FROM glossaries WHERE tenant = %s AND id = %s", (tenant, glossary_id))
            return cursor.rowcount > 0
