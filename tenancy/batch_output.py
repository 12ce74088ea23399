"""A batch's output file written while its jobs finish, so that it is ready when the last one is.

Writing 100,000 output lines after the last job finished took a batch seconds with the worker
idle. Instead, one API server follows a running batch: it holds a claim on it (renewed while it
writes, lapsing if the server dies), appends the lines of the finished prefix of the input as it
grows (a line's place in the output is known once every line before it is final), and when the
last job finishes it claims ``finalizing`` and completes the file. The file is invisible until
then and recorded on the batch, so whoever takes a lapsed claim over deletes it and starts again;
a batch nobody follows is still finalized by the first read that sees it finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from storage import AsyncBatchStore, BatchRow, FileStore, FileWriter
from tenancy.batch_lines import encode_output_line

FOLLOW_SECONDS = 30.0
"""How long a follower's claim holds without being renewed (a dead server's batch waits this long)."""
RENEW_SECONDS = 5.0
"""How often a follower renews its claim."""
POLL_SECONDS = 0.2
"""How often a follower looks for newly finished lines when there were none."""
PREFIX_STEP = 10_000
"""Lines looked at per query for the finished prefix."""
APPEND_BYTES = 4 << 20
"""Rendered output gathered before it is appended to the file: four chunks a transaction (each commit
waits for its WAL to reach the disk, and a large batch's output is tens of megabytes)."""


@dataclass(frozen=True, slots=True)
class FollowedOutput:
    """What a follower leaves when the batch's jobs are all final: the batch, claimed ``finalizing``,
    and its completed output file (``None`` if no line succeeded)."""

    row: BatchRow
    output_file_id: str | None


class OutputFollower:
    """Writes the output files of the batches this server follows (``follower`` names the server)."""

    def __init__(self, files: FileStore, batches: AsyncBatchStore, follower: str) -> None:
        self._files = files
        self._batches = batches
        self._follower = follower

    @property
    def follower(self) -> str:
        """The token of this server's claims."""
        return self._follower

    async def follow(self, row: BatchRow) -> FollowedOutput | None:
        """Write ``row``'s output as its lines finish (the caller holds the claim); ``None`` if the claim
        was lost meanwhile (another server took the batch over), the file then deleted."""
        writer = await self._files.begin(row.tenant, "batch_output", f"{row.id}_output.jsonl")
        completed = False
        try:
            if not await self._renew(row, writer):
                return None
            wrote = await self._write_until_final(row, writer)
            if wrote is None:
                return None
            claimed = await self._batches.claim_finalizing(row.id, follower=self._follower)
            if claimed is None:
                return None
            if not wrote:
                return FollowedOutput(claimed, None)
            stored = await writer.complete()
            completed = True
            return FollowedOutput(claimed, stored.id)
        finally:
            if not completed:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._files.discard(writer.id))

    async def _write_until_final(self, row: BatchRow, writer: FileWriter) -> bool | None:
        """Append every finished line's output until all ``row.total`` are final; whether any line was
        written, or ``None`` if the claim was lost."""
        pending = bytearray()
        line, wrote, renewed = 0, False, time.monotonic()
        while line < row.total:
            if time.monotonic() - renewed >= RENEW_SECONDS:
                if not await self._renew(row, writer):
                    return None
                renewed = time.monotonic()
            end = await self._batches.finished_prefix(row.run_id, line, PREFIX_STEP)
            if end == line:
                await asyncio.sleep(POLL_SECONDS)
                continue
            async for output in self._batches.iter_output_rows(row.run_id, start=line, stop=end):
                pending += encode_output_line(output, row.endpoint)
                pending += b"\n"
                wrote = True
                if len(pending) >= APPEND_BYTES:
                    await writer.append(bytes(pending))
                    pending.clear()
            line = end
        await writer.append(bytes(pending))
        return wrote

    async def _renew(self, row: BatchRow, writer: FileWriter) -> bool:
        return await self._batches.renew_following(row.id, self._follower, FOLLOW_SECONDS, writer.id)


__all__ = ["FOLLOW_SECONDS", "FollowedOutput", "OutputFollower"]
