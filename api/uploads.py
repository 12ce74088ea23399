"""Request bodies spooled before they are stored: no database connection waits on a slow client.

A run's JSONL used to stream from the socket straight into the file store, holding one of its
pooled connections (inside a transaction) for as long as the client took to send it: a few
clients trickling a line a second took every connection, and other tenants' uploads and
downloads failed. Now the body is read first (memory up to ``DRAGOMAN_UPLOAD_MEMORY_BYTES``,
then a temporary file, under the API's body deadlines), and the store's connection is taken
only to write bytes that are all here. ``/v1/files`` gets the same from Starlette's multipart
parser, which spools each file part before the route runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterable, AsyncIterator
from typing import BinaryIO, cast

from starlette.datastructures import UploadFile

READ_BYTES = 1024 * 1024
"""How much of a spooled body is read back at a time (one file-store chunk)."""
_WRITE_BYTES = 256 * 1024


async def spool(body: AsyncIterable[bytes], memory_bytes: int) -> UploadFile:
    """``body`` read whole into a spooled temporary file (its ``size`` counted); the caller closes it.

    Writes to the file once it is on disk run in a thread (Starlette's :class:`UploadFile`), a
    quarter MiB at a time rather than once per socket read.
    """
    upload = UploadFile(cast(BinaryIO, tempfile.SpooledTemporaryFile(max_size=memory_bytes)), size=0)
    try:
        pending: list[bytes] = []
        held = 0
        async for piece in body:
            pending.append(piece)
            held += len(piece)
            if held >= _WRITE_BYTES:
                await upload.write(b"".join(pending))
                pending, held = [], 0
        if pending:
            await upload.write(b"".join(pending))
    except BaseException:
        await upload.close()
        raise
    return upload


async def spooled_chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    """A spooled body's bytes from its start, :data:`READ_BYTES` at a time (disk reads in a thread)."""
    await upload.seek(0)
    while piece := await upload.read(READ_BYTES):
        yield piece
