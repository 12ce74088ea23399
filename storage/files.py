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
_COLUMNS = "id, tenant, purpose, filename, bytes, created_at, expires_at"
_LIVE = "(expires_at IS NULL OR expires_at > now())"
"""A file not yet expired: an expired one is gone for its owner at once, whenever the sweeper deletes it."""
RUN_INPUT_PURPOSE = "run_input"
"""A run's JSONL while it is validated and queued (deleted by the run's submission, never by its owner)."""
_READING_BATCH_STATUS = "validating"
"""The one status in which a batch reads its input file (validated, then enqueued from a local spill: once it
is ``in_progress`` the input may go, as on OpenAI)."""
STALE_RESERVATION_SECONDS = 3_600
"""How old an upload's reservation (a row never completed) must be before the sweeper deletes it: its
bytes arrive from a local spool, so an hour-old one belongs to a server that died while storing it."""


class FileGoneError(DragomanError):
    """A file being written was discarded meanwhile (another server took the work over)."""


class FileTooLargeError(DragomanError):
    """An upload passed the size limit (``DRAGOMAN_MAX_FILE_BYTES``); nothing of it was kept."""


class FileQuotaExceededError(DragomanError):
    """An upload would take its tenant past ``DRAGOMAN_FILE_QUOTA_BYTES``; nothing of it was kept."""


class FileInUseError(DragomanError):
    """A file that a batch or a run being submitted still reads cannot be deleted (yet)."""


class LineTooLongError(DragomanError, ValueError):
    """A JSONL line longer than the cap (``DRAGOMAN_MAX_JSONL_LINE_BYTES``), found before it was held whole."""

    def __init__(self, line: int, limit: int) -> None:
        super().__init__(
            f"line {line} is longer than {limit:,} bytes (DRAGOMAN_MAX_JSONL_LINE_BYTES); "
            "split its text or raise the limit"
        )
        self.line = line
        self.limit = limit


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One stored file: its id, owner, purpose, name, size and creation time."""

    id: str
    tenant: str
    purpose: str
    filename: str
    bytes: int
    created_at: datetime
    expires_at: datetime | None = None


def new_file_id() -> str:
    """A new file id in OpenAI's form (``file-`` and 24 random hex digits)."""
    return "file-" + secrets.token_hex(12)


class FileStore(Protocol):
    """Where Batch API files live: create (streamed in), look up, list, read (streamed out), delete.

    Every lookup is scoped to a tenant: another tenant's file is ``None``, as if it did not exist.
    """

    async def create(
        self,
        tenant: str,
        purpose: str,
        filename: str,
        data: AsyncIterable[bytes],
        *,
        max_bytes: int,
        quota: Quota | None = None,
        expires_after_seconds: int | None = None,
        max_line_bytes: int | None = None,
    ) -> StoredFile:
        """Store ``data`` as a new file; :class:`FileTooLargeError` (nothing kept) past ``max_bytes``.

        With a ``quota``, the file's size (known: the upload was spooled) is reserved against the
        tenant's stored bytes first (:class:`FileQuotaExceededError`, nothing kept); with
        ``max_line_bytes``, a longer line is :class:`LineTooLongError` (nothing kept).
        """
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

    async def delete(self, tenant: str, file_id: str, *, force: bool = False) -> bool:
        """Delete the tenant's file and its bytes; whether there was one.

        :class:`FileInUseError` for the input of a batch being validated or a run's upload being
        submitted, unless ``force`` (the run's submission deleting its own upload).
        """
        ...

    async def sweep(self) -> int:
        """Delete expired files (not those a batch still reads) and stale upload reservations; how many."""
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


@dataclass(frozen=True, slots=True)
class Quota:
    """What an upload is checked against: the tenant may store ``max_bytes`` in all, and this upload is ``size``."""

    max_bytes: int
    size: int


def _file(row: tuple[Any, ...]) -> StoredFile:
    return StoredFile(*row)


class PostgresFileStore:
    """:class:`FileStore` in PostgreSQL: a ``files`` row and ``file_chunks`` rows of the bytes."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def create(
        self,
        tenant: str,
        purpose: str,
        filename: str,
        data: AsyncIterable[bytes],
        *,
        max_bytes: int,
        quota: Quota | None = None,
        expires_after_seconds: int | None = None,
        max_line_bytes: int | None = None,
    ) -> StoredFile:
        """Store ``data`` chunk by chunk in one transaction (so a failed upload leaves nothing).

        With a ``quota`` the size is reserved first in a short transaction of its own, under the
        tenant's advisory lock, so concurrent uploads are counted exactly without one waiting for
        another's bytes; the reservation (an incomplete row of that size) is dropped if storing fails.
        """
        file_id = new_file_id()
        if quota is not None:
            if quota.size > max_bytes:
                raise _too_large(max_bytes)
            await self._reserve(file_id, tenant, purpose, filename, quota, expires_after_seconds)
        try:
            async with self._pool.connection() as conn, conn.transaction():
                if quota is None:
                    await conn.execute(
                        "INSERT INTO files (id, tenant, purpose, filename, expires_at) "
                        "VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s))",
                        (file_id, tenant, purpose, filename, expires_after_seconds),
                    )
                lines = LineCap(max_line_bytes) if max_line_bytes is not None else None
                size, seq, pending = 0, 0, bytearray()
                async for piece in data:
                    size += len(piece)
                    if size > max_bytes or (quota is not None and size > quota.size):
                        raise _too_large(max_bytes)
                    if lines is not None:
                        lines.feed(piece)
                    pending += piece
                    while len(pending) >= CHUNK_BYTES:
                        await _insert_chunk(conn, file_id, seq, bytes(pending[:CHUNK_BYTES]))
                        del pending[:CHUNK_BYTES]
                        seq += 1
                if pending:
                    await _insert_chunk(conn, file_id, seq, bytes(pending))
                cursor = await conn.execute(
                    f"UPDATE files SET bytes = %s, complete = true WHERE id = %s RETURNING {_COLUMNS}",
                    (size, file_id),
                )
                row = await cursor.fetchone()
        except BaseException:
            if quota is not None:
                await asyncio.shield(self._release(file_id))
            raise
        assert row is not None
        return _file(row)

    async def _reserve(
        self, file_id: str, tenant: str, purpose: str, filename: str, quota: Quota, expires_after: int | None
    ) -> None:
        """Insert the file's row, incomplete and of its full size, if the tenant's bytes leave room for it."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('dragoman.files:' || %s, 0))", (tenant,))
            cursor = await conn.execute(
                f"SELECT COALESCE(sum(bytes), 0) FROM files WHERE tenant = %s AND {_LIVE}", (tenant,)
            )
            row = await cursor.fetchone()
            used = int(row[0]) if row else 0
            if used + quota.size > quota.max_bytes:
                raise FileQuotaExceededError(
                    f"this upload of {quota.size:,} bytes would take your stored files to {used + quota.size:,} "
                    f"bytes, over your quota of {quota.max_bytes:,} (DRAGOMAN_FILE_QUOTA_BYTES); "
                    "delete files you no longer need (DELETE /v1/files/{file_id}) and retry"
                )
            await conn.execute(
                "INSERT INTO files (id, tenant, purpose, filename, bytes, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s))",
                (file_id, tenant, purpose, filename, quota.size, expires_after),
            )

    async def _release(self, file_id: str) -> None:
        """Drop a reservation whose bytes were not stored (its row was never completed)."""
        async with self._pool.connection() as conn:
            await conn.execute("DELETE FROM files WHERE id = %s AND NOT complete", (file_id,))

    async def usage(self, tenant: str) -> int:
        """The bytes the tenant's files take (reservations of uploads being stored included; expired ones not)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT COALESCE(sum(bytes), 0) FROM files WHERE tenant = %s AND {_LIVE}", (tenant,)
            )
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def get(self, tenant: str, file_id: str) -> StoredFile | None:
        """The tenant's (complete) file, or ``None``."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM files WHERE id = %s AND tenant = %s AND complete AND {_LIVE}",
                (file_id, tenant),
            )
            row = await cursor.fetchone()
        return None if row is None else _file(row)

    async def list(
        self, tenant: str, *, purpose: str | None, after: str | None, limit: int, descending: bool
    ) -> list[StoredFile]:
        """Up to ``limit`` of the tenant's files in creation order (newest first if ``descending``)."""
        op, order = ("<", "DESC") if descending else (">", "ASC")
        where = ["tenant = %s", "complete", _LIVE]
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

    async def delete(self, tenant: str, file_id: str, *, force: bool = False) -> bool:
        """Delete the tenant's file (its chunks go with it); :class:`FileInUseError` if a batch being validated
        reads it or it is a run's upload being submitted (unless ``force``).

        The check and the delete are one statement, so a file is never deleted from under a batch
        that was seen reading it.
        """
        async with self._pool.connection() as conn:
            if force:
                cursor = await conn.execute("DELETE FROM files WHERE id = %s AND tenant = %s", (file_id, tenant))
                return cursor.rowcount > 0
            cursor = await conn.execute(
                f"DELETE FROM files WHERE id = %s AND tenant = %s AND {_LIVE} AND purpose <> %s "
                f"AND NOT {_in_use('files.id')}",
                (file_id, tenant, RUN_INPUT_PURPOSE, _READING_BATCH_STATUS),
            )
            if cursor.rowcount > 0:
                return True
            cursor = await conn.execute(
                "SELECT f.purpose, (SELECT b.id || ' (' || b.status || ')' FROM batches b "
                "WHERE b.input_file_id = f.id AND b.status = %s LIMIT 1) "
                f"FROM files f WHERE f.id = %s AND f.tenant = %s AND f.complete AND {_LIVE}",
                (_READING_BATCH_STATUS, file_id, tenant),
            )
            row = await cursor.fetchone()
        if row is None:
            return False
        purpose, batch = row
        if batch is not None:
            raise FileInUseError(
                f"file {file_id} is the input of batch {batch}, which is reading it; delete it once the batch is "
                "in_progress (or cancel the batch)"
            )
        if purpose == RUN_INPUT_PURPOSE:
            raise FileInUseError(
                f"file {file_id} is the upload of a run being submitted; it is deleted once its jobs are queued"
            )
        return False  # deleted meanwhile by another request

    async def sweep(self) -> int:
        """Delete expired files that no batch still reads, and upload reservations older than
        :data:`STALE_RESERVATION_SECONDS`; how many files went (their chunks with them)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM files WHERE (expires_at IS NOT NULL AND expires_at <= now() "
                f"AND NOT {_in_use('files.id')}) OR (NOT complete AND bytes > 0 AND purpose <> 'batch_output' "
                "AND created_at < now() - make_interval(secs => %s))",
                (_READING_BATCH_STATUS, STALE_RESERVATION_SECONDS),
            )
            return cursor.rowcount


def _in_use(file_column: str) -> str:
    """SQL true when a batch still reads the file (its status, ``validating``, is the parameter that follows)."""
    return f"EXISTS (SELECT 1 FROM batches b WHERE b.input_file_id = {file_column} AND b.status = %s)"


def _too_large(max_bytes: int) -> FileTooLargeError:
    return FileTooLargeError(f"the file is over the limit of {max_bytes:,} bytes (DRAGOMAN_MAX_FILE_BYTES)")


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


class LineCap:
    """Counts the lines of bytes fed to it a piece at a time and refuses one over ``max_bytes``
    (:class:`LineTooLongError` naming it) as soon as it passes: each byte is looked at once, nothing is kept."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.line = 1
        self._length = 0

    def feed(self, piece: bytes) -> None:
        """Account for ``piece``; raise if the line it ends or continues is over the cap."""
        start = 0
        while (end := piece.find(b"\n", start)) != -1:
            if self._length + end - start > self.max_bytes:
                raise LineTooLongError(self.line, self.max_bytes)
            self.line += 1
            self._length = 0
            start = end + 1
        self._length += len(piece) - start
        if self._length > self.max_bytes:
            raise LineTooLongError(self.line, self.max_bytes)


async def iter_lines(chunks: AsyncIterable[bytes], *, max_line_bytes: int | None = None) -> AsyncIterator[bytes]:
    """The lines of a chunked file (without their line ends), however the chunks cut them.

    Linear in the file's size: a line's pieces are joined once, when its end arrives (never by
    growing one buffer chunk after chunk), and each chunk is searched for line ends once. With
    ``max_line_bytes``, a longer line is :class:`LineTooLongError` (naming it) as soon as it
    passes the cap, before more of it is read.
    """
    parts: list[bytes] = []
    length = 0
    number = 1
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if max_line_bytes is not None and length + end - start > max_line_bytes:
                raise LineTooLongError(number, max_line_bytes)
            piece = chunk[start:end]
            line = b"".join((*parts, piece)) if parts else piece
            yield line.rstrip(b"\r")
            parts, length, number, start = [], 0, number + 1, end + 1
        if start < len(chunk):
            length += len(chunk) - start
            if max_line_bytes is not None and length > max_line_bytes:
                raise LineTooLongError(number, max_line_bytes)
            parts.append(chunk[start:])
    if parts:
        yield b"".join(parts).rstrip(b"\r")


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


async def numbered_lines(
    files: FileStore, file_id: str, *, max_line_bytes: int | None = None
) -> AsyncIterator[tuple[int, bytes]]:
    """The non-blank lines of a stored file with their (1-based) line numbers (blank lines count);
    :class:`LineTooLongError` for a line over ``max_line_bytes``."""
    number = 0
    async for line in iter_lines(read_ahead(files.read(file_id)), max_line_bytes=max_line_bytes):
        number += 1
        if line.strip():
            yield number, line
