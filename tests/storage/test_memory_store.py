"""The translation_memory table: recall counts hits, store keeps the first, limits and purges delete the right rows."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import psycopg
import pytest

from storage import libpq_url, upgrade_database
from storage.connection import DatabaseUnavailableError
from storage.memory import MemoryEntry, MemoryStore, MemoryStoreError


def _key(name: str) -> bytes:
    return hashlib.sha256(name.encode()).digest()


def _entry(name: str, translation: str, model: str = "m@1") -> MemoryEntry:
    return MemoryEntry(
        key=_key(name).hex(),
        model=model,
        profile="few-shot:1",
        source_lang="en",
        target_lang="fr",
        source_text=name,
        translation=translation,
        prompt_tokens=10,
        output_tokens=4,
    )


@pytest.fixture
async def store(fresh_database: str) -> AsyncIterator[MemoryStore]:
    """A memory store on a migrated database of its own (purges and trims touch the whole table)."""
    upgrade_database(fresh_database)
    memory = MemoryStore(fresh_database)
    yield memory
    await memory.close()


async def test_recall_finds_stored_translations_and_counts_hits(store: MemoryStore) -> None:
    await store.store([_entry("Hello", "Bonjour"), _entry("Cat", "Chat")])
    await store.store([_entry("Hello", "Salut")])  # a key already stored keeps its first translation
    found = await store.recall([_key("Hello"), _key("Nothing")])
    assert set(found) == {_key("Hello")}
    assert found[_key("Hello")].translation == "Bonjour" and found[_key("Hello")].prompt_tokens == 10
    await store.recall([_key("Hello")])
    [stats] = await store.stats()
    assert (stats.model, stats.entries, stats.hits) == ("m@1", 2, 2)
    assert stats.text_bytes == len("HelloBonjourCatChat")


async def test_limits_expire_old_entries_and_trim_the_least_recently_used(
    store: MemoryStore, fresh_database: str
) -> None:
    database_url = fresh_database
    await store.store([_entry(f"text {i}", f"texte {i}") for i in range(5)])
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True) as conn:
        await conn.execute(
            "UPDATE translation_memory SET created_at = now() - interval '40 days' WHERE source_text = 'text 0'"
        )
        await conn.execute(
            "UPDATE translation_memory SET last_used_at = now() - interval '1 day' WHERE source_text = 'text 1'"
        )
    assert await store.expire(30 * 86_400) == 1
    assert await store.trim(3) == 1  # four left, the limit is three: "text 1" was used longest ago
    found = await store.recall([_key(f"text {i}") for i in range(5)])
    assert sorted(r.translation for r in found.values()) == ["texte 2", "texte 3", "texte 4"]


async def test_purge_by_model_or_all(store: MemoryStore) -> None:
    await store.store([_entry("a", "A", model="old@1"), _entry("b", "B", model="new@2")])
    assert await store.purge(model="old@1") == 1
    assert [s.model for s in await store.stats()] == ["new@2"]
    assert await store.purge() == 1
    assert await store.stats() == []


async def test_a_missing_table_says_to_migrate(fresh_database: str) -> None:
    store = MemoryStore(fresh_database)  # not migrated
    with pytest.raises(MemoryStoreError, match="dragoman migrate"):
        await store.recall([_key("x")])
    await store.close()


async def test_an_unreachable_server_is_reported_as_unavailable() -> None:
    store = MemoryStore("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    with pytest.raises(DatabaseUnavailableError):
        await store.recall([_key("x")])
    await store.close()
