"""Files of the OpenAI-compatible Batch API: a :class:`FileStore` protocol and its PostgreSQL store.

A file's bytes are kept in chunks (``file_chunks``, at most :data:`CHUNK_BYTES` a row), written
as they arrive and read back one chunk at a time, so neither an upload nor a download is ever
held whole in memory. An S3-compatible store can implement :class:`FileStore` later; nothing
outside this module knows how the bytes are kept.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from contract.errors import DragomanError
from storage.connection import AsyncConnectionPool

CHUNK_BYTES = 1024 * 1024
_COLUMNS = "id, tenant, purpose, filename, bytes, created_at"


class FileGoneError(DragomanError):
    """A file being written was discarded meanwhile (another server took the work over)."""


class FileTooLargeError(DragomanError):
    """An upload passed the size limit (``DRAGOMAN_MAX_FILE_BYTES``); nothing of it was kept."""


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One stored file: its id, owner, purpose, name, size and creation time."""

    id: str
    tenant: str
    purpose: str
    filename: str
    bytes: int
    created_at: datetime


def new_file_id() -> str:
    """A new file id in OpenAI's form (``file-`` and 24 random hex digits)."""
    return "file-" + secrets.token_hex(12)


class FileStore(Protocol):
    """Where Batch API files live: create (streamed in), look up, list, read (streamed out), delete.

    Every lookup is scoped to a tenant: another tenant's file is ``None``, as if it did not exist.
    """

    async def create(
        self, tenant: str, purpose: str, filename: str, data: AsyncIterable[bytes], *, max_bytes: int
    ) -> StoredFile:
        """Store ``data`` as a new file; :class:`FileTooLargeError` (nothing kept) past ``max_bytes``."""
        ...

    async def get(self, tenant: str, file_id: str) -> StoredFile | None:
        """The tenant's file, or ``None``."""
        ...

    async def list(
        self, tenant: str, *, purpose: str | None, after: str | None, limit: int, descending: bool
    ) -> list[StoredFile]:
        """Up to ``limit`` of the tenant's files, by creation time, after the file ``after``."""
        ...

    def read(self, file_id: str) -> AsyncIterator[bytes]:
        """The file's bytes, chunk by chunk (the caller checked ownership)."""
        ...

    async def begin(self, tenant: str, purpose: str, filename: str) -> FileWriter:
        """A new file written a piece at a time: invisible (to :meth:`get`, :meth:`list`) until completed."""
        ...

    async def discard(self, file_id: str) -> None:
        """Delete a file that was begun and never completed (a completed file is left alone)."""
        ...

    async def delete(self, tenant: str, file_id: str) -> bool:
        """Delete the tenant's file and its bytes; whether there was one."""
        ...


class FileWriter(Protocol):
    """A file being written over time (a batch's output while its jobs finish): its id, appends, completion."""

    @property
    def id(self) -> str:
        """The file's id (recorded by the caller, so that whoever finds it abandoned can discard it)."""
        ...

    async def append(self, data: bytes) -> None:
        """Add ``data`` at the end (kept at once: a later failure does not lose it)."""
        ...

    async def complete(self) -> StoredFile:
        """Make the file visible, as it is now; nothing can be appended after."""
        ...


def _file(row: tuple[Any, ...]) -> StoredFile:
    return StoredFile(*row)


class PostgresFileStore:
    """:class:`FileStore` in PostgreSQL: a ``files`` row and ``file_chunks`` rows of the bytes."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def create(
        self, tenant: str, purpose: str, filename: str, data: AsyncIterable[bytes], *, max_bytes: int
    ) -> StoredFile:
        """Store ``data`` chunk by chunk in one transaction (so a failed upload leaves nothing)."""
        file_id = new_file_id()
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO files (id, tenant, purpose, filename) VALUES (%s, %s, %s, %s)",
                (file_id, tenant, purpose, filename),
            )
            size, seq, pending = 0, 0, bytearray()
            async for piece in data:
                size += len(piece)
                if size > max_bytes:
                    raise FileTooLargeError(
                        f"the file is over the limit of {max_bytes:,} bytes (DRAGOMAN_MAX_FILE_BYTES)"
                    )
                pending += piece
                while len(pending) >= CHUNK_BYTES:
                    await _insert_chunk(conn, file_id, seq, bytes(pending[:CHUNK_BYTES]))
                    del pending[:CHUNK_BYTES]
                    seq += 1
            if pending:
                await _insert_chunk(conn, file_id, seq, bytes(pending))
            cursor = await conn.execute(
                f"UPDATE files SET bytes = %s, complete = true WHERE id = %s RETURNING {_COLUMNS}", (size, file_id)
            )
            row = await cursor.fetchone()
        assert row is not None
        return _file(row)

    async def get(self, tenant: str, file_id: str) -> StoredFile | None:
        """The tenant's (complete) file, or ``None``."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM files WHERE id = %s AND tenant = %s AND complete", (file_id, tenant)
            )
            row = await cursor.fetchone()
        return None if row is None else _file(row)

    async def list(
        self, tenant: str, *, purpose: str | None, after: str | None, limit: int, descending: bool
    ) -> list[StoredFile]:
        """Up to ``limit`` of the tenant's files in creation order (newest first if ``descending``)."""
        op, order = ("<", "DESC") if descending else (">", "ASC")
        where = ["tenant = %s", "complete"]
        params: list[Any] = [tenant]
        if purpose:
            where.append("purpose = %s")
            params.append(purpose)
        if after:
            where.append(f"(created_at, id) {op} (SELECT created_at, id FROM files WHERE id = %s AND tenant = %s)")
            params += [after, tenant]
        params.append(limit)
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM files WHERE {' AND '.join(where)} "
                f"ORDER BY created_at {order}, id {order} LIMIT %s",
                params,
            )
            rows = await cursor.fetchall()
        return [_file(row) for row in rows]

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        """The file's chunks in order, one query each (no connection is held between chunks)."""
        seq = 0
        while True:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT data FROM file_chunks WHERE file_id = %s AND seq = %s", (file_id, seq)
                )
                row = await cursor.fetchone()
            if row is None:
                return
            yield bytes(row[0])
            seq += 1

    async def begin(self, tenant: str, purpose: str, filename: str) -> PostgresFileWriter:
        """A ``files`` row not yet complete; each append is a transaction of its own."""
        file_id = new_file_id()
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO files (id, tenant, purpose, filename) VALUES (%s, %s, %s, %s)",
                (file_id, tenant, purpose, filename),
            )
        return PostgresFileWriter(self._pool, file_id)

    async def discard(self, file_id: str) -> None:
        """Delete the file if it was never completed (its chunks go with it)."""
        async with self._pool.connection() as conn:
            await conn.execute("DELETE FROM files WHERE id = %s AND NOT complete", (file_id,))

    async def delete(self, tenant: str, file_id: str) -> bool:
        """Delete the tenant's file (its chunks go with it)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute("DELETE FROM files WHERE id = %s AND tenant = %s", (file_id, tenant))
            return cursor.rowcount > 0


class PostgresFileWriter:
    """:class:`FileWriter` of :class:`PostgresFileStore`: chunks appended, then the row marked complete."""

    def __init__(self, pool: AsyncConnectionPool, file_id: str) -> None:
        self._pool = pool
        self._id = file_id
        self._seq = 0
        self._size = 0

    @property
    def id(self) -> str:
        """The file's id."""
        return self._id

    async def append(self, data: bytes) -> None:
        """Store ``data`` as the next chunks (at most :data:`CHUNK_BYTES` each), in one transaction."""
        if not data:
            return
        async with self._pool.connection() as conn, conn.transaction():
            for start in range(0, len(data), CHUNK_BYTES):
                await _insert_chunk(conn, self._id, self._seq, data[start : start + CHUNK_BYTES])
                self._seq += 1
            self._size += len(data)

    async def complete(self) -> StoredFile:
        """Record the size and make the file visible; :class:`FileGoneError` if it was discarded meanwhile."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"UPDATE files SET bytes = %s, complete = true WHERE id = %s AND NOT complete RETURNING {_COLUMNS}",
                (self._size, self._id),
            )
            row = await cursor.fetchone()
        if row is None:
            raise FileGoneError(f"file {self._id} was discarded while it was being written")
        return _file(row)


async def _insert_chunk(conn: Any, file_id: str, seq: int, data: bytes) -> None:
    await conn.execute("INSERT INTO file_chunks (file_id, seq, data) VALUES (%s, %s, %s)", (file_id, seq, data))


async def iter_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The lines of a chunked file (without their line ends), however the chunks cut them."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r")
    if pending:
        yield pending.rstrip(b"\r")


async def read_ahead(chunks: AsyncIterator[bytes], depth: int = 2) -> AsyncIterator[bytes]:
    """``chunks``, with up to ``depth`` of them fetched ahead in a task while the caller works on the last.

    Reading a chunk is a database round trip; a caller that parses each one (a batch's validation)
    then no longer waits for the next between its own pieces of work.
    """
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=depth)

    async def fetch() -> None:
        try:
            async for chunk in chunks:
                await queue.put(chunk)
            await queue.put(None)
        except Exception as exc:  # raised in the caller's task
            await queue.put(exc)

    fetcher = asyncio.create_task(fetch())
    try:
        while (chunk := await queue.get()) is not None:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk
    finally:
        fetcher.cancel()
        await asyncio.gather(fetcher, return_exceptions=True)


async def numbered_lines(files: FileStore, file_id: str) -> AsyncIterator[tuple[int, bytes]]:
    """The non-blank lines of a stored file with their (1-based) line numbers (blank lines count)."""
    number = 0
    async for line in iter_lines(read_ahead(files.read(file_id))):
        number += 1
        if line.strip():
            yield number, line
