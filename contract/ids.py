"""Job, run and document ids: UUIDs in one canonical form, and the ids derived from a group."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
import uuid
import zlib

# What every dragoman producer writes; matching it skips the parse on the worker's hot path.
_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def canonical_uuid(value: object) -> str | None:
    """``value`` as a canonical lower-case UUID string, or ``None`` if it is not a UUID.

    Every form :class:`uuid.UUID` reads is accepted (upper case, braces, ``urn:uuid:``, no
    hyphens), with surrounding whitespace ignored, and :class:`uuid.UUID` objects. Anything else
    (a number, a list from a wire entry) is ``None``. Callers turn ``None`` into their own error.
    """
    if isinstance(value, uuid.UUID):
        return str(value)
    if not isinstance(value, str):
        return None
    if _CANONICAL.fullmatch(value):
        return value
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        return None


def new_job_id() -> str:
    """A new id for a job, run or document: a UUID version 7 (RFC 9562), which starts with its
    creation time in milliseconds, so ids sort by time and name the day they were made (the jobs
    table's partition, ``storage``)."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(millis.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70  # version 7
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def shard_of(job_id: str, shards: int) -> int:
    """The Redis shard a job lives on: ``crc32(job id as UTF-8) mod shards`` (0 with one shard).

    The id is taken as written (dragoman's ids are canonical lower-case UUIDs), so a producer in
    another language that computes CRC-32 (zlib's, every standard library's) of the same text
    finds the same shard. See ``broker/keys.py``.
    """
    if shards <= 1:
        return 0
    return zlib.crc32(job_id.encode()) % shards


def key_shard(idempotency_key: str, tenant: str | None, shards: int) -> int:
    """The shard an idempotency key lives on: :func:`shard_of` of ``<tenant>:<key>`` (a tenant's) or ``<key>``.

    A job submitted under the key is placed on this shard (:func:`new_job_id_on_shard`), so a retry
    under a fresh id finds the key where the first submission wrote it.
    """
    return shard_of(idempotency_key if tenant is None else f"{tenant}:{idempotency_key}", shards)


def new_job_id_on_shard(shard: int, shards: int) -> str:
    """A :func:`new_job_id` that lives on ``shard`` of ``shards`` (:func:`shard_of`).

    A job submitted under an idempotency key must live on the key's shard, where the script that
    checks the key runs. Draws about ``shards`` ids on average.
    """
    while True:
        job_id = new_job_id()
        if shard_of(job_id, shards) == shard:
            return job_id


def job_id_for(group_id: str, sequence: int) -> str:
    """The id of a run's (or document's) job number ``sequence``: the same every time it is computed.

    For a group id that is a UUID version 7 (every group made since job ids became v7), the job's
    id is a v7 UUID too: the group's 48-bit timestamp, then the bits of the SHA-1 below, so all
    of a group's jobs name the group's creation day (the ``jobs`` table's partition: a group's
    rows lie in one partition, ``storage.partitions``). For an older group id it is
    ``uuid5(UUID(group_id), str(sequence))`` as before, so a run created before the upgrade and
    resumed after it recomputes the same ids. Computed without building UUID objects: a
    100,000-line batch derives every id when it is validated and again when it is cancelled.
    """
    namespace = _namespace(group_id)
    digest = hashlib.sha1(namespace + str(sequence).encode()).digest()
    if namespace[6] >> 4 == 7 and namespace[8] >> 6 == 0b10:
        raw = bytearray(namespace[:6] + digest[:10])
        raw[6] = (raw[6] & 0x0F) | 0x70  # version 7
    else:
        raw = bytearray(digest[:16])
        raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@functools.lru_cache(maxsize=256)
def _namespace(group_id: str) -> bytes:
    return uuid.UUID(group_id).bytes
