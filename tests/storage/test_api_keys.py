"""The ``api_keys`` table: keys stored hashed, found by hash only while active; jobs rows keep their tenant."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from contract.errors import InvalidJobError
from contract.services import ServiceUrls
from storage import ApiKeyStore, AsyncConnectionPool, JobStore
from storage.api_keys import ApiKeyNotFoundError, hash_api_key


@pytest.fixture
async def store(service_urls: ServiceUrls) -> AsyncIterator[ApiKeyStore]:
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    yield ApiKeyStore(pool)
    await pool.close()


async def test_found_by_the_key_until_revoked(store: ApiKeyStore, pg: object) -> None:
    key, secret = await store.create(f"k-{uuid.uuid4().hex[:8]}", tenant="acme")
    assert secret.startswith("dgm_") and key.prefix == secret[:12] and key.active
    row = pg.execute("SELECT key_hash FROM api_keys WHERE id = %s", (key.id,)).fetchone()  # type: ignore[attr-defined]
    assert row == (hash_api_key(secret),) and secret not in str(row)
    found = await store.find(secret)
    assert found is not None and (found.id, found.tenant) == (key.id, "acme")
    assert await store.find(secret + "x") is None
    assert key.id in {k.id for k in await store.list()}
    revoked = await store.revoke(key.id)
    assert revoked.id == key.id and not revoked.active
    assert await store.find(secret) is None
    assert key.id not in {k.id for k in await store.list()}
    assert key.id in {k.id for k in await store.list(include_revoked=True)}
    with pytest.raises(ApiKeyNotFoundError):
        await store.revoke(key.id)
    with pytest.raises(ApiKeyNotFoundError):
        await store.revoke(str(uuid.uuid4()))
    with pytest.raises(ApiKeyNotFoundError, match="not an API key id"):
        await store.revoke("not-a-uuid")


async def test_bad_names_tenants_and_limits(store: ApiKeyStore) -> None:
    with pytest.raises(InvalidJobError, match="tenant"):
        await store.create("x", tenant="a:b")
    with pytest.raises(ValueError, match="name"):
        await store.create(" ", tenant="acme")
    with pytest.raises(ValueError, match="positive"):
        await store.create("x", tenant="acme", rate_limit_per_minute=0)


async def test_the_async_job_store_reads_rows_with_their_tenant(service_urls: ServiceUrls, pg: object) -> None:
    job_id = str(uuid.uuid4())
    pg.execute(  # type: ignore[attr-defined]
        "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, tenant, created_day) "
        "VALUES (%s, 'succeeded', 'en', 'fr', 'hi', now(), 'acme', jobs_created_day(%s, now()))",
        (job_id, job_id),
    )
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    try:
        jobs = JobStore(pool)
        job = await jobs.get(job_id)
        assert job is not None and job.tenant == "acme" and job.status == "succeeded"
        assert await jobs.get(str(uuid.uuid4())) is None
    finally:
        await pool.close()


async def test_the_pool_serves_more_lookups_than_connections(service_urls: ServiceUrls) -> None:
    import asyncio

    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    try:
        jobs = JobStore(pool)
        results = await asyncio.gather(*(jobs.get(str(uuid.uuid4())) for _ in range(20)))
        assert results == [None] * 20
    finally:
        await pool.close()
