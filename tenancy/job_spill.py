"""A batch's validated jobs kept on local disk between its validation and its enqueueing.

Nothing of a batch is enqueued until every line has been checked, so its jobs are read twice:
once to validate, once to queue. Reading the input file from storage again and parsing every
line a second time cost a 100,000-line batch about a third of its creation time; instead, the
validating pass writes each line's finished job here (msgpack, a frame of ``frame_size`` jobs at
a time, one submit round trip's worth), and the enqueueing pass reads the frames back. The file
is the creating server's own temporary file, deleted when the batch is enqueued (or fails): a
batch resumed elsewhere validates again and writes its own.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from typing import IO

import msgspec

from contract.schemas import JobSpec

_LENGTH_BYTES = 8
_FLUSH_BYTES = 4 << 20
"""Encoded frames gathered in memory before they are written (one thread hop per 4 MiB)."""


class JobSpill:
    """Append validated jobs, then read them back in the same order, a frame at a time."""

    def __init__(self, frame_size: int) -> None:
        self._frame_size = frame_size
        self._frame: list[JobSpec] = []
        self._pending = bytearray()
        self._file: IO[bytes] | None = None
        self._count = 0
        self._encoder = msgspec.msgpack.Encoder()

    async def __aenter__(self) -> JobSpill:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def count(self) -> int:
        """Jobs added so far."""
        return self._count

    async def add(self, spec: JobSpec) -> None:
        """Keep ``spec`` for :meth:`frames`."""
        self._frame.append(spec)
        self._count += 1
        if len(self._frame) >= self._frame_size:
            self._seal_frame()
            if len(self._pending) >= _FLUSH_BYTES:
                await self._flush()

    async def frames(self) -> AsyncIterator[list[JobSpec]]:
        """The jobs added, in order, ``frame_size`` at a time (the last frame may be shorter)."""
        self._seal_frame()
        await self._flush()
        if self._file is None:
            return
        decoder = msgspec.msgpack.Decoder(list[JobSpec])
        await asyncio.to_thread(self._file.seek, 0)
        while True:
            frame = await asyncio.to_thread(_read_frame, self._file)
            if frame is None:
                return
            yield decoder.decode(frame)

    async def close(self) -> None:
        """Delete the file."""
        if self._file is not None:
            file, self._file = self._file, None
            await asyncio.to_thread(file.close)

    def _seal_frame(self) -> None:
        if self._frame:
            encoded = self._encoder.encode(self._frame)
            self._pending += len(encoded).to_bytes(_LENGTH_BYTES, "big") + encoded
            self._frame = []

    async def _flush(self) -> None:
        if not self._pending:
            return
        data, self._pending = bytes(self._pending), bytearray()
        if self._file is None:
            self._file = await asyncio.to_thread(_new_file)
        await asyncio.to_thread(_write, self._file, data)


def _write(file: IO[bytes], data: bytes) -> None:
    file.write(data)


def _new_file() -> IO[bytes]:
    return tempfile.TemporaryFile(prefix="dragoman-batch-jobs-")


def _read_frame(file: IO[bytes]) -> bytes | None:
    header = file.read(_LENGTH_BYTES)
    if not header:
        return None
    size = int.from_bytes(header, "big")
    frame = file.read(size)
    if len(header) != _LENGTH_BYTES or len(frame) != size:
        raise OSError(f"a batch's job spill file was cut short ({len(frame)} of {size} bytes in a frame)")
    return frame
