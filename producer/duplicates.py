"""Finding repeated keys among millions in bounded memory: an external sort of their digests.

Validating a run file must refuse a ``custom_id`` used twice, but holding every id seen (or its
digest) in a Python set costs about 130 MB per million lines. :class:`DuplicateFinder` keeps at
most ``run_size`` records in memory: each is a key's 16-byte BLAKE2b digest followed by its line
number, packed into 20 bytes; full chunks are sorted and spilled to a temporary file; at the end
the sorted chunks are merged and equal neighbours are the duplicates. Sorting bytes orders by
digest, then line, so each duplicate is reported against the first line that used the key.

The alternatives weighed: a temporary Redis set moves the same memory to the server (and makes
validation depend on it); the deterministic job ids cannot help, as they derive from line
numbers, not from ``custom_id``. Disk costs 20 bytes a line, deleted when the check ends.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import IO

_DIGEST_BYTES = 16
_RECORD_BYTES = _DIGEST_BYTES + 4  # digest, then the line number (big-endian: sorts as a number)
DEFAULT_RUN_SIZE = 250_000
"""Records held in memory before a sorted chunk is spilled (about 15 MB of Python objects)."""


class DuplicateFinder:
    """Add ``(key, line)`` pairs, then ask which lines repeat a key of an earlier line."""

    def __init__(self, run_size: int | None = None) -> None:
        self._run_size = run_size or DEFAULT_RUN_SIZE
        self._records: list[bytes] = []
        self._spilled: IO[bytes] | None = None
        self._chunks: list[tuple[int, int]] = []  # (offset, records) of each sorted chunk in the spill file

    def __enter__(self) -> DuplicateFinder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the spill file."""
        if self._spilled is not None:
            self._spilled.close()
            self._spilled = None

    def add(self, key: str, line: int) -> None:
        """Note that ``line`` (a positive number below 2**32) uses ``key``."""
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_BYTES).digest()
        self._records.append(digest + line.to_bytes(4, "big"))
        if len(self._records) >= self._run_size:
            self._spill()

    def duplicates(self, limit: int) -> list[tuple[int, int]]:
        """Up to ``limit`` pairs ``(line, first line with the same key)``, ordered by line."""
        return heapq.nsmallest(limit, self._pairs())  # bounded: never more than ``limit`` held

    def duplicates_counted(self, limit: int) -> tuple[list[tuple[int, int]], int]:
        """:meth:`duplicates`, and how many lines repeat an earlier line's key in all."""
        kept: list[tuple[int, int]] = []  # the ``limit`` lowest lines, as a max-heap of negated pairs
        total = 0
        for line, first in self._pairs():
            total += 1
            if len(kept) < limit:
                heapq.heappush(kept, (-line, -first))
            elif kept and -kept[0][0] > line:
                heapq.heapreplace(kept, (-line, -first))
        return sorted((-line, -first) for line, first in kept), total

    def _pairs(self) -> Iterator[tuple[int, int]]:
        previous: bytes | None = None
        first_line = 0
        for record in self._merged():
            digest, line = record[:_DIGEST_BYTES], int.from_bytes(record[_DIGEST_BYTES:], "big")
            if digest == previous:
                yield line, first_line
            else:
                previous, first_line = digest, line

    def _spill(self) -> None:
        if self._spilled is None:
            self._spilled = tempfile.TemporaryFile(prefix="dragoman-ids-")
        self._records.sort()
        offset = self._spilled.seek(0, 2)
        self._spilled.write(b"".join(self._records))
        self._chunks.append((offset, len(self._records)))
        self._records = []

    def _merged(self) -> Iterator[bytes]:
        self._records.sort()
        if self._spilled is None:
            return iter(self._records)
        self._spilled.flush()
        streams = [self._read_chunk(offset, count) for offset, count in self._chunks]
        return heapq.merge(iter(self._records), *streams)

    def _read_chunk(self, offset: int, count: int) -> Iterator[bytes]:
        """One sorted chunk, read back a block at a time (each chunk has its own file position)."""
        assert self._spilled is not None
        block_records = 4_096
        done = 0
        while done < count:
            take = min(block_records, count - done)
            self._spilled.seek(offset + done * _RECORD_BYTES)
            block = self._spilled.read(take * _RECORD_BYTES)
            for start in range(0, len(block), _RECORD_BYTES):
                yield block[start : start + _RECORD_BYTES]
            done += take


class WantedCustomIds:
    """The ``custom_id`` of a few (valid) numbered JSONL lines, picked up while the lines go by (for an error message).

    The one implementation of what is kept and when reading may stop, fed alike by a synchronous
    loop (a local run file, :mod:`producer.run_files`) and an asynchronous one (the API's file
    store, :func:`custom_ids_at`).
    """

    def __init__(self, wanted: set[int]) -> None:
        self.found: dict[int, str] = {}
        self._wanted = wanted
        self._last = max(wanted, default=0)

    @property
    def any_wanted(self) -> bool:
        """Whether any line is wanted at all (if not, there is nothing to read)."""
        return bool(self._wanted)

    def offer(self, number: int, line: str | bytes) -> bool:
        """Keep line ``number``'s ``custom_id`` if it is wanted; ``True`` once the last wanted line went by."""
        if number in self._wanted:
            self.found[number] = str(json.loads(line)["custom_id"])
        return number >= self._last


async def custom_ids_at(lines: AsyncIterator[tuple[int, bytes]], wanted: set[int]) -> dict[int, str]:
    """The ``custom_id`` of the ``wanted`` lines of ``lines`` (:class:`WantedCustomIds` over an async stream)."""
    picker = WantedCustomIds(wanted)
    if picker.any_wanted:
        async for number, raw in lines:
            if picker.offer(number, raw):
                break
    return picker.found
