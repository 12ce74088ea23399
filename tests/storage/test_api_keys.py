"""The ``api_keys`` table: keys stored hashed, found by hash only while active; jobs rows keep their tenant."""

from __future__ import annotations

import uuid

import pytest

from contract.errors import InvalidJobError
from contract.services import ServiceUrls
from storage import ApiKeyStore, AsyncApiKeyStore, AsyncConnectionPool, JobStore, PostgresConnection
from storage.api_keys import ApiKeyNotFoundError, hash_api_key


@pytest.fixture
def store(service_urls: ServiceUrls) -> ApiKeyStore:
    return ApiKeyStore(PostgresConnection(service_urls.database_url))


async def test_found_by_the_key_until_revoked(store: ApiKeyStore, service_urls: ServiceUrls, pg: object) -> None:
    key, secret = store.create(f"k-{uuid.uuid4().hex[:8]}", tenant="acme")
    assert secret.startswith("dgm_") and key.prefix == secret[:12] and key.active
    row = pg.execute("SELECT key_hash FROM api_keys WHERE id = %s", (key.id,)).fetchone()  # type: ignore[attr-defined]
    assert row == (hash_api_key(secret),) and secret not in str(row)
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    finder = AsyncApiKeyStore(pool)
    try:
        found = await finder.find(secret)
        assert found is not None and (found.id, found.tenant) == (key.id, "acme")
        assert await finder.find(secret + "x") is None
        store.revoke(key.id)
        assert await finder.find(secret) is None
    finally:
        await pool.close()
    with pytest.raises(ApiKeyNotFoundError):
        store.revoke(key.id)
    with pytest.raises(ApiKeyNotFoundError):
        store.revoke(str(uuid.uuid4()))


def test_bad_names_tenants_and_limits(store: ApiKeyStore) -> None:
    with pytest.raises(InvalidJobError, match="tenant"):
        store.create("x", tenant="a:b")
    with pytest.raises(ValueError, match="name"):
        store.create(" ", tenant="acme")
    with pytest.raises(ValueError, match="positive"):
        store.create("x", tenant="acme", rate_limit_per_minute=0)


async def test_the_async_job_store_reads_rows_with_their_tenant(service_urls: ServiceUrls, pg: object) -> None:
    job_id = str(uuid.uuid4())
    pg.execute(  # type: ignore[attr-defined]
        "INSERT INTO jobs (id, status, source_lang, target_lang, source_text, created_at, tenant) "
        "VALUES (%s, 'succeeded', 'en', 'fr', 'hi', now(), 'acme')",
        (job_id,),
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
