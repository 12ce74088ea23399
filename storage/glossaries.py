"""The ``glossaries`` table: a tenant's named term lists, each of one or more language pairs (the DeepL door).

A glossary is one or more **dictionaries** (DeepL's word: one language pair's entries), each a row,
sharing the glossary's id (``glossary_id``), name and creation time: DeepL's v2 glossaries have one,
its v3 (multilingual) glossaries several, one per pair. A glossary is created whole and never edited
here; a dictionary's entries are one JSONB array of ``[source, target]`` pairs in the order they were
given, read whole when a translation names the glossary and its pair. Every read and the delete are
scoped to one tenant: another tenant's id is the same as an unknown one.

A tenant's glossaries are held to a quota (:class:`GlossaryQuota`: how many glossaries, whatever their
dictionaries, and the bytes of all their terms, ``entry_bytes``), checked where every glossary is
stored, :meth:`GlossaryStore.create`: under the tenant's advisory lock, in the transaction that inserts
the glossary, so two creates at once cannot both take the last place (the second waits for the first's
commit and counts it).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contract.errors import DragomanError
from storage.connection import AsyncConnectionPool

_INFO_COLUMNS = "glossary_id, name, created_at, source_lang, target_lang, entry_count"


@dataclass(frozen=True, slots=True)
class DictionaryInfo:
    """One language pair of a glossary, without its entries."""

    source_lang: str
    target_lang: str
    entry_count: int


@dataclass(frozen=True, slots=True)
class GlossaryInfo:
    """A stored glossary without its entries: what a listing shows."""

    id: str
    name: str
    created_at: datetime
    dictionaries: tuple[DictionaryInfo, ...]

    @property
    def monolingual(self) -> DictionaryInfo | None:
        """Its one dictionary, if it has one (a DeepL v2 glossary); ``None`` for a multilingual glossary."""
        return self.dictionaries[0] if len(self.dictionaries) == 1 else None

    def dictionary(self, source_lang: str, target_lang: str) -> DictionaryInfo | None:
        """Its dictionary for the pair, if it has one."""
        return next(
            (d for d in self.dictionaries if (d.source_lang, d.target_lang) == (source_lang, target_lang)), None
        )


@dataclass(frozen=True, slots=True)
class Dictionary:
    """One language pair's entries, ``(source term, target term)`` in the order they were given: what is stored."""

    source_lang: str
    target_lang: str
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


def _infos(rows: Sequence[tuple[Any, ...]]) -> list[GlossaryInfo]:
    """The glossaries of :data:`_INFO_COLUMNS` rows (one per dictionary, a glossary's rows together), in order."""
    infos: list[GlossaryInfo] = []
    for glossary_id, name, created_at, source_lang, target_lang, entry_count in rows:
        dictionary = DictionaryInfo(source_lang, target_lang, entry_count)
        if infos and infos[-1].id == glossary_id:
            last = infos[-1]
            infos[-1] = GlossaryInfo(last.id, last.name, last.created_at, (*last.dictionaries, dictionary))
        else:
            infos.append(GlossaryInfo(glossary_id, name, created_at, (dictionary,)))
    return infos


class GlossaryStore:
    """Create, list, read and delete one tenant's glossaries on a connection pool (the API's), within ``quota``."""

    def __init__(self, pool: AsyncConnectionPool, quota: GlossaryQuota) -> None:
        self._pool = pool
        self.quota = quota

    async def create(self, tenant: str, name: str, dictionaries: Sequence[Dictionary]) -> GlossaryInfo:
        """Store a new glossary of ``tenant`` with ``dictionaries`` (validated already: entries, one per pair); its
        info, with a fresh id (a glossary of one dictionary: the id of its row too).

        Raises :class:`GlossaryQuotaExceededError` if the tenant's glossaries, this one with them, would be more
        than the quota allows, in number or in bytes (checked under the tenant's lock: see the module's docstring).
        """
        glossary_id = str(uuid.uuid4())
        sizes = [entry_bytes(dictionary.entries) for dictionary in dictionaries]
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('dragoman.glossaries:' || %s, 0))", (tenant,)
            )
            cursor = await conn.execute(_USAGE_SQL, (tenant,))
            counted = await cursor.fetchone()
            count, used = (int(counted[0]), int(counted[1])) if counted else (0, 0)
            self._check_quota(count, used, sum(sizes))
            rows = []
            for number, (dictionary, size) in enumerate(zip(dictionaries, sizes, strict=True)):
                row_id = glossary_id if number == 0 else str(uuid.uuid4())
                cursor = await conn.execute(
                    "INSERT INTO glossaries (id, glossary_id, tenant, name, source_lang, target_lang, entries, "
                    f"entry_count, entry_bytes) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_INFO_COLUMNS}",
                    (
                        row_id,
                        glossary_id,
                        tenant,
                        name,
                        dictionary.source_lang,
                        dictionary.target_lang,
                        json.dumps(dictionary.entries),
                        len(dictionary.entries),
                        size,
                    ),
                )
                row = await cursor.fetchone()
                assert row is not None  # an INSERT ... RETURNING returns its row
                rows.append(tuple(row))
        (info,) = _infos(sorted(rows, key=lambda row: (row[3], row[4])))  # by pair, as every read orders them
        return info

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
            cursor = await conn.execute(_USAGE_SQL, (tenant,))
            row = await cursor.fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def check_room(self, tenant: str) -> None:
        """Raise :class:`GlossaryQuotaExceededError` if ``tenant`` has no room for one more glossary of any size.

        A cheap early answer, before a glossary's entries are read: :meth:`create` checks again, exactly.
        """
        count, used = await self.usage(tenant)
        self._check_quota(count, used, 1)

    async def info(self, tenant: str, glossary_id: str) -> GlossaryInfo | None:
        """``tenant``'s glossary ``glossary_id`` with its dictionaries; ``None`` if unknown or another tenant's."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM glossaries WHERE tenant = %s AND glossary_id = %s "
                "ORDER BY source_lang, target_lang",
                (tenant, glossary_id),
            )
            rows = await cursor.fetchall()
        infos = _infos(rows)
        return infos[0] if infos else None

    async def entries(
        self, tenant: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> list[tuple[str, str]] | None:
        """The entries of ``tenant``'s glossary ``glossary_id`` for the pair, in the order given; ``None`` if it has
        no such dictionary (or is unknown, or another tenant's)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT entries FROM glossaries WHERE tenant = %s AND glossary_id = %s AND source_lang = %s "
                "AND target_lang = %s",
                (tenant, glossary_id, source_lang, target_lang),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        entries = row[0]
        if isinstance(entries, str):  # a connection without the JSON loader answers text
            entries = json.loads(entries)
        return [(str(source), str(target)) for source, target in entries]

    async def list(self, tenant: str) -> list[GlossaryInfo]:
        """``tenant``'s glossaries, oldest first, each with its dictionaries (by pair), without their entries."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM glossaries WHERE tenant = %s "
                "ORDER BY created_at, glossary_id, source_lang, target_lang",
                (tenant,),
            )
            rows = await cursor.fetchall()
        return _infos(rows)

    async def delete(self, tenant: str, glossary_id: str) -> bool:
        """Delete ``tenant``'s glossary ``glossary_id``, every dictionary of it; whether there was one."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM glossaries WHERE tenant = %s AND glossary_id = %s", (tenant, glossary_id)
            )
            return cursor.rowcount > 0


_USAGE_SQL = "SELECT count(DISTINCT glossary_id), COALESCE(sum(entry_bytes), 0) FROM glossaries WHERE tenant = %s"
"""A tenant's glossaries (whatever their dictionaries) and the bytes of all their terms."""
