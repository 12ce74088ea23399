"""Issue 33 in the file store: the JSONL splitter is linear and capped, the quota is exact under
concurrency, files expire and are swept, and a file a batch or a run still reads is not deleted."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from contract.services import ServiceUrls
from storage import (
    RUN_INPUT_PURPOSE,
    AsyncBatchStore,
    AsyncConnectionPool,
    FileInUseError,
    FileQuotaExceededError,
    LineCap,
    LineTooLongError,
    PostgresFileStore,
    Quota,
    iter_lines,
)

MiB = 1024 * 1024


class CountedChunks:
    """A file's chunks, counting how many the reader took."""

    def __init__(self, data_chunks: int, chunk: bytes, tail: bytes = b"") -> None:
        self.taken = 0
        self._n = data_chunks
        self._chunk = chunk
        self._tail = tail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self._n):
            self.taken += 1
            yield self._chunk
        if self._tail:
            self.taken += 1
            yield self._tail


async def _pieces(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


@pytest.fixture
async def store(service_urls: ServiceUrls) -> AsyncIterator[PostgresFileStore]:
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=12)
    yield PostgresFileStore(pool)
    await pool.close()


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


# The splitter -----------------------------------------------------------------------------------


async def test_a_20_mib_line_is_refused_at_the_cap_naming_it_without_reading_it_whole() -> None:
    source = CountedChunks(20 * 16, b"x" * (64 * 1024))  # one 20 MiB line in 64 KiB chunks
    lines = iter_lines(_prefixed(b'{"ok": 1}\n', source), max_line_bytes=MiB)
    assert await anext(lines) == b'{"ok": 1}'
    with pytest.raises(LineTooLongError, match="line 2 is longer than 1,048,576 bytes") as raised:
        await anext(lines)
    assert raised.value.line == 2
    assert source.taken <= MiB // (64 * 1024) + 1  # stopped at the cap: 17 of the 320 chunks


async def _prefixed(first: bytes, rest: CountedChunks) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


async def test_a_20_mib_line_under_the_cap_comes_back_exact_from_small_chunks() -> None:
    line = bytes(range(11, 256)) * (20 * MiB // 245)  # no line ends in it
    pieces = [line[i : i + 4096] for i in range(0, len(line), 4096)]  # 5,120 chunks: quadratic joining shows
    got = [out async for out in iter_lines(_pieces(b"a\r\n", *pieces, b"\r\nb"), max_line_bytes=32 * MiB)]
    assert got == [b"a", line, b"b"]


async def test_lines_split_anywhere_come_back_the_same() -> None:
    text = b'{"a": 1}\n\n{"b": 22}\r\n{"c": 333}'
    for cut in range(1, len(text)):
        got = [line async for line in iter_lines(_pieces(text[:cut], text[cut:]), max_line_bytes=12)]
        assert got == [b'{"a": 1}', b"", b'{"b": 22}', b'{"c": 333}'], cut


def test_the_line_cap_counts_lines_across_pieces() -> None:
    cap = LineCap(5)
    cap.feed(b"12345\n123")
    cap.feed(b"45\n\n1")
    with pytest.raises(LineTooLongError) as raised:
        cap.feed(b"23456")
    assert raised.value.line == 4


# Quota ------------------------------------------------------------------------------------------


async def test_an_upload_past_the_quota_is_refused_and_nothing_is_kept(store: PostgresFileStore) -> None:
    tenant = _tenant()
    await store.create(tenant, "batch", "a", _pieces(b"x" * 60), max_bytes=1000, quota=Quota(100, 60))
    with pytest.raises(FileQuotaExceededError, match="over your quota of 100"):
        await store.create(tenant, "batch", "b", _pieces(b"y" * 50), max_bytes=1000, quota=Quota(100, 50))
    assert await store.usage(tenant) == 60
    assert len(await store.list(tenant, purpose=None, after=None, limit=10, descending=True)) == 1
    other = _tenant()  # the quota is the tenant's own
    await store.create(other, "batch", "c", _pieces(b"z" * 100), max_bytes=1000, quota=Quota(100, 100))


async def test_concurrent_uploads_cannot_pass_the_quota_together(store: PostgresFileStore) -> None:
    tenant = _tenant()

    async def upload(n: int) -> bool:
        try:
            await store.create(tenant, "batch", f"f{n}", _slow(b"x" * 30), max_bytes=1000, quota=Quota(100, 30))
        except FileQuotaExceededError:
            return False
        return True

    results = await asyncio.gather(*(upload(n) for n in range(10)))
    assert sum(results) == 3
    assert await store.usage(tenant) == 90


async def _slow(data: bytes) -> AsyncIterator[bytes]:
    await asyncio.sleep(0.05)  # every upload reserves before any of them has stored its bytes
    yield data


async def test_a_failed_upload_gives_its_reservation_back(store: PostgresFileStore) -> None:
    tenant = _tenant()

    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * 10
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        await store.create(tenant, "batch", "a", broken(), max_bytes=1000, quota=Quota(100, 90))
    assert await store.usage(tenant) == 0


async def test_a_line_past_the_cap_stores_nothing(store: PostgresFileStore) -> None:
    tenant = _tenant()
    with pytest.raises(LineTooLongError, match="line 2"):
        await store.create(
            tenant,
            "batch",
            "a",
            _pieces(b"ok\n", b"y" * 200),
            max_bytes=1000,
            quota=Quota(1000, 203),
            max_line_bytes=100,
        )
    assert await store.usage(tenant) == 0
    assert await store.list(tenant, purpose=None, after=None, limit=10, descending=True) == []


# Expiry -----------------------------------------------------------------------------------------


async def _expire_now(database_url: str, file_id: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("UPDATE files SET expires_at = now() - interval '1 second' WHERE id = %s", (file_id,))


async def _chunk_rows(database_url: str, file_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT count(*) FROM file_chunks WHERE file_id = %s", (file_id,))
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_an_expired_file_is_gone_at_once_and_the_sweep_frees_its_bytes(
    store: PostgresFileStore, service_urls: ServiceUrls
) -> None:
    tenant = _tenant()
    kept = await store.create(tenant, "batch", "kept", _pieces(b"k\n"), max_bytes=100)
    stored = await store.create(
        tenant, "batch", "a", _pieces(b"hello\n"), max_bytes=100, quota=Quota(100, 6), expires_after_seconds=3600
    )
    assert stored.expires_at is not None and 3599 <= (stored.expires_at - stored.created_at).total_seconds() <= 3601
    assert kept.expires_at is None
    await _expire_now(service_urls.database_url, stored.id)
    assert await store.get(tenant, stored.id) is None
    assert [f.id for f in await store.list(tenant, purpose=None, after=None, limit=10, descending=True)] == [kept.id]
    assert await store.usage(tenant) == 2  # an expired file no longer counts
    assert await _chunk_rows(service_urls.database_url, stored.id) == 1
    assert await store.sweep() >= 1
    assert await _chunk_rows(service_urls.database_url, stored.id) == 0
    assert await store.get(tenant, kept.id) is not None


# In use -----------------------------------------------------------------------------------------


async def test_the_input_of_a_validating_batch_cannot_be_deleted(
    store: PostgresFileStore, service_urls: ServiceUrls
) -> None:
    tenant = _tenant()
    stored = await store.create(tenant, "batch", "in.jsonl", _pieces(b"{}\n"), max_bytes=100)
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=1)
    try:
        run_id = str(uuid.uuid4())
        batch = await AsyncBatchStore(pool).create(
            f"batch_{run_id.replace('-', '')}", tenant, run_id, "/v1/translations", stored.id, "24h", 86_400, None
        )
        with pytest.raises(FileInUseError, match=f"input of batch {batch.id} \\(validating\\)"):
            await store.delete(tenant, stored.id)
        await _expire_now(service_urls.database_url, stored.id)
        await store.sweep()  # expired, but the batch still reads it: kept until it is in_progress
        assert await _chunk_rows(service_urls.database_url, stored.id) == 1
    finally:
        await pool.close()


async def test_a_run_upload_is_deleted_only_by_its_submission(store: PostgresFileStore) -> None:
    tenant = _tenant()
    stored = await store.create(tenant, RUN_INPUT_PURPOSE, "run.jsonl", _pieces(b"{}\n"), max_bytes=100)
    with pytest.raises(FileInUseError, match="upload of a run being submitted"):
        await store.delete(tenant, stored.id)
    assert not await store.delete("someone-else", stored.id)
    assert await store.delete(tenant, stored.id, force=True)
