"""The ``glossaries`` table: a tenant's glossaries are stored whole, read back in order and kept apart."""

from __future__ import annotations

import uuid

from storage import AsyncConnectionPool, GlossaryStore


async def test_a_glossary_round_trips_with_its_entries_in_order(pool: AsyncConnectionPool) -> None:
    store = GlossaryStore(pool)
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    entries = [("zebra", "Zebra"), ("apple", "Apfel"), ("tab\u00e9", "Tabé")]
    info = await store.create(tenant, "fruit", "en", "de", entries)
    assert (info.name, info.source_lang, info.target_lang, info.entry_count) == ("fruit", "en", "de", 3)
    assert info.created_at.tzinfo is not None

    found = await store.get(tenant, info.id)
    assert found is not None and found.info == info
    assert found.entries == entries  # the order given, not sorted
    assert [g.id for g in await store.list(tenant)] == [info.id]


async def test_another_tenant_neither_sees_nor_deletes_a_glossary(pool: AsyncConnectionPool) -> None:
    store = GlossaryStore(pool)
    owner, other = f"acme-{uuid.uuid4().hex[:8]}", f"globex-{uuid.uuid4().hex[:8]}"
    info = await store.create(owner, "g", "en", "fr", [("a", "b")])
    assert await store.get(other, info.id) is None
    assert await store.list(other) == []
    assert await store.delete(other, info.id) is False
    assert await store.delete(owner, info.id) is True
    assert await store.get(owner, info.id) is None
    assert await store.delete(owner, info.id) is False
