"""The ``glossaries`` table: a tenant's named term lists for one language pair (the DeepL-compatible door).

A glossary is created whole and never edited (DeepL's v2 glossaries are immutable): its entries are
one JSONB array of ``[source, target]`` pairs in the order they were given, read whole when a
translation names it. Every read and the delete are scoped to one tenant: another tenant's id is
the same as an unknown one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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


def _info(row: tuple[Any, ...]) -> GlossaryInfo:
    return GlossaryInfo(*row)


class GlossaryStore:
    """Create, list, read and delete one tenant's glossaries on a connection pool (the API's)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def create(
        self, tenant: str, name: str, source_lang: str, target_lang: str, entries: list[tuple[str, str]]
    ) -> GlossaryInfo:
        """Store a new glossary of ``tenant`` (entries already validated); its info, with a fresh id."""
        glossary_id = str(uuid.uuid4())
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO glossaries (id, tenant, name, source_lang, target_lang, entries, entry_count) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_INFO_COLUMNS}",
                (glossary_id, tenant, name, source_lang, target_lang, json.dumps(entries), len(entries)),
            )
            row = await cursor.fetchone()
        assert row is not None  # an INSERT ... RETURNING returns its row
        return _info(row)

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
