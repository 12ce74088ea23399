"""The ``glossaries`` table: glossaries stored whole, read back in order, kept apart by tenant, held to a quota."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from contract.services import ServiceUrls
from storage import (
    AsyncConnectionPool,
    Dictionary,
    DictionaryInfo,
    GlossaryQuota,
    GlossaryQuotaExceededError,
    GlossaryStore,
)
from storage.glossaries import entry_bytes

ROOMY = GlossaryQuota(max_count=1_000, max_bytes=1024**3)


async def test_a_glossary_round_trips_with_its_entries_in_order(pool: AsyncConnectionPool) -> None:
    store = GlossaryStore(pool, ROOMY)
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    entries = [("zebra", "Zebra"), ("apple", "Apfel"), ("tab\u00e9", "Tabé")]
    info = await store.create(tenant, "fruit", [Dictionary("en", "de", entries)])
    assert (info.name, info.dictionaries) == ("fruit", (DictionaryInfo("en", "de", 3),))
    assert info.created_at.tzinfo is not None

    assert await store.info(tenant, info.id) == info
    assert await store.entries(tenant, info.id, "en", "de") == entries  # the order given, not sorted
    assert await store.entries(tenant, info.id, "de", "en") is None
    assert [g.id for g in await store.list(tenant)] == [info.id]


async def test_a_multilingual_glossary_keeps_a_dictionary_per_pair_and_counts_once(pool: AsyncConnectionPool) -> None:
    """DeepL's v3 glossaries: one id, one name, several pairs; the quota counts the glossary once, all its terms."""
    store = GlossaryStore(pool, ROOMY)
    tenant = f"multi-{uuid.uuid4().hex[:8]}"
    single = await store.create(tenant, "one", [Dictionary("en", "fr", [("a", "b")])])
    info = await store.create(
        tenant, "both ways", [Dictionary("en", "de", [("cat", "Katze")]), Dictionary("de", "en", [("Hund", "dog")])]
    )
    assert info.dictionaries == (DictionaryInfo("de", "en", 1), DictionaryInfo("en", "de", 1))  # by pair
    assert info.monolingual is None and single.monolingual == DictionaryInfo("en", "fr", 1)
    assert await store.info(tenant, info.id) == info
    assert await store.entries(tenant, info.id, "de", "en") == [("Hund", "dog")]
    assert await store.list(tenant) == [single, info]
    assert await store.usage(tenant) == (2, len("abcatKatzeHunddog"))
    assert await store.delete(tenant, info.id) is True  # every dictionary of it
    assert await store.info(tenant, info.id) is None and await store.usage(tenant) == (1, 2)


async def test_another_tenant_neither_sees_nor_deletes_a_glossary(pool: AsyncConnectionPool) -> None:
    store = GlossaryStore(pool, ROOMY)
    owner, other = f"acme-{uuid.uuid4().hex[:8]}", f"globex-{uuid.uuid4().hex[:8]}"
    info = await store.create(owner, "g", [Dictionary("en", "fr", [("a", "b")])])
    assert await store.info(other, info.id) is None
    assert await store.entries(other, info.id, "en", "fr") is None
    assert await store.list(other) == []
    assert await store.delete(other, info.id) is False
    assert await store.delete(owner, info.id) is True
    assert await store.info(owner, info.id) is None
    assert await store.delete(owner, info.id) is False


async def test_the_byte_quota_counts_the_terms_utf8_bytes_and_a_delete_gives_them_back(
    pool: AsyncConnectionPool,
) -> None:
    """Two glossaries of 10 bytes fit a quota of 25, a third does not (nothing stored); deleting one makes room."""
    entries = [("Äpfel", "appl")]  # 6 + 4 bytes
    assert entry_bytes(entries) == 10
    store = GlossaryStore(pool, GlossaryQuota(max_count=100, max_bytes=25))
    tenant = f"bytes-{uuid.uuid4().hex[:8]}"
    first = await store.create(tenant, "a", [Dictionary("de", "en", entries)])
    await store.create(tenant, "b", [Dictionary("de", "en", entries)])
    with pytest.raises(GlossaryQuotaExceededError, match=r"would take your glossaries to 30 bytes, over your quota"):
        await store.create(tenant, "c", [Dictionary("de", "en", entries)])
    assert await store.usage(tenant) == (2, 20)
    assert await store.delete(tenant, first.id)
    await store.create(tenant, "c", [Dictionary("de", "en", entries)])
    assert await store.usage(tenant) == (2, 20)
    other = f"other-{uuid.uuid4().hex[:8]}"
    await store.create(other, "a", [Dictionary("de", "en", entries)])  # another tenant's quota is its own


@pytest.fixture
async def wide_pool(service_urls: ServiceUrls) -> AsyncIterator[AsyncConnectionPool]:
    """Enough connections for twenty creates to run at once."""
    connections = AsyncConnectionPool(service_urls.database_url, max_connections=20)
    yield connections
    await connections.close()


async def test_creates_racing_for_the_last_places_never_pass_the_quota(wide_pool: AsyncConnectionPool) -> None:
    """Twenty creates at once against a quota of five glossaries: exactly five are stored, fifteen refused."""
    store = GlossaryStore(wide_pool, GlossaryQuota(max_count=5, max_bytes=1024**2))
    tenant = f"race-{uuid.uuid4().hex[:8]}"
    outcomes = await asyncio.gather(
        *(store.create(tenant, f"g{n}", [Dictionary("en", "de", [(f"t{n}", "u")])]) for n in range(20)),
        return_exceptions=True,
    )
    refused = [outcome for outcome in outcomes if isinstance(outcome, GlossaryQuotaExceededError)]
    assert len(refused) == 15, outcomes
    assert "DRAGOMAN_GLOSSARY_QUOTA_COUNT=5" in str(refused[0])
    assert len(await store.list(tenant)) == 5
