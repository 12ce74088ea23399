"""The PostgreSQL file store: chunked in and out, scoped to a tenant, nothing kept of a refused upload."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contract.services import ServiceUrls
from storage import AsyncConnectionPool, FileGoneError, FileTooLargeError, PostgresFileStore, iter_lines
from storage.files import CHUNK_BYTES


async def _pieces(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def _read(store: PostgresFileStore, file_id: str) -> list[bytes]:
    return [chunk async for chunk in store.read(file_id)]


@pytest.fixture
async def store(service_urls: ServiceUrls) -> AsyncIterator[PostgresFileStore]:
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=2)
    yield PostgresFileStore(pool)
    await pool.close()


async def test_a_file_is_stored_in_chunks_and_read_back_whole(store: PostgresFileStore) -> None:
    data = bytes(range(256)) * (CHUNK_BYTES // 128 + 3)  # a little over two chunks, in odd pieces
    pieces = [data[i : i + 300_001] for i in range(0, len(data), 300_001)]
    stored = await store.create("t-chunks", "batch", "in.jsonl", _pieces(*pieces), max_bytes=len(data))
    assert stored.bytes == len(data) and stored.filename == "in.jsonl" and stored.id.startswith("file-")
    chunks = await _read(store, stored.id)
    assert [len(chunk) for chunk in chunks] == [CHUNK_BYTES, CHUNK_BYTES, len(data) - 2 * CHUNK_BYTES]
    assert b"".join(chunks) == data


async def test_an_upload_over_the_limit_keeps_nothing(store: PostgresFileStore) -> None:
    with pytest.raises(FileTooLargeError, match="DRAGOMAN_MAX_FILE_BYTES"):
        await store.create("t-limit", "batch", "big", _pieces(b"x" * 10, b"y" * 10), max_bytes=15)
    assert await store.list("t-limit", purpose=None, after=None, limit=10, descending=True) == []


async def test_another_tenant_sees_nothing_and_delete_removes_the_bytes(store: PostgresFileStore) -> None:
    stored = await store.create("t-owner", "batch", "a", _pieces(b"hello\n"), max_bytes=100)
    assert await store.get("t-other", stored.id) is None
    assert not await store.delete("t-other", stored.id)
    assert await store.get("t-owner", stored.id) == stored
    assert await store.delete("t-owner", stored.id)
    assert await store.get("t-owner", stored.id) is None and await _read(store, stored.id) == []


async def test_list_pages_in_creation_order(store: PostgresFileStore) -> None:
    ids = [(await store.create("t-list", "batch", f"f{n}", _pieces(b"x"), max_bytes=10)).id for n in range(3)]
    newest = await store.list("t-list", purpose="batch", after=None, limit=2, descending=True)
    assert [f.id for f in newest] == ids[::-1][:2]
    rest = await store.list("t-list", purpose="batch", after=newest[-1].id, limit=2, descending=True)
    assert [f.id for f in rest] == [ids[0]]
    oldest = await store.list("t-list", purpose=None, after=ids[0], limit=5, descending=False)
    assert [f.id for f in oldest] == ids[1:]
    assert await store.list("t-list", purpose="batch_output", after=None, limit=5, descending=True) == []


async def test_a_file_written_over_time_is_invisible_until_completed(store: PostgresFileStore) -> None:
    writer = await store.begin("t-append", "batch_output", "out.jsonl")
    await writer.append(b"one\n")
    await writer.append(b"")
    await writer.append(b"x" * (CHUNK_BYTES + 5))
    assert await store.get("t-append", writer.id) is None
    assert await store.list("t-append", purpose=None, after=None, limit=5, descending=True) == []
    stored = await writer.complete()
    assert stored.id == writer.id and stored.bytes == 4 + CHUNK_BYTES + 5 and stored.purpose == "batch_output"
    assert await store.get("t-append", writer.id) == stored
    assert b"".join(await _read(store, stored.id)) == b"one\n" + b"x" * (CHUNK_BYTES + 5)
    await store.discard(stored.id)  # a completed file is not discarded
    assert await store.get("t-append", stored.id) == stored


async def test_a_discarded_file_cannot_be_completed_and_leaves_no_bytes(store: PostgresFileStore) -> None:
    writer = await store.begin("t-discard", "batch_output", "out.jsonl")
    await writer.append(b"partial\n")
    await store.discard(writer.id)
    assert await _read(store, writer.id) == []
    with pytest.raises(FileGoneError, match="discarded"):
        await writer.complete()


async def test_lines_are_split_however_the_chunks_cut_them() -> None:
    lines = [line async for line in iter_lines(_pieces(b"one\r\ntw", b"o\n", b"", b"\nthree"))]
    assert lines == [b"one", b"two", b"", b"three"]
