"""The ``jobs`` table's daily partitions: the day a job's row lives in, the coming days', the expired days'.

``jobs`` is partitioned by ``created_day`` (migration 0022): the UTC day of the id's timestamp for a
UUID version 7 (every id dragoman makes), else the UTC day of the row's ``created_at``. The SQL
function ``jobs_created_day(id, created_at)`` computes it for every insert; :func:`job_day` is its
v7 half here, so a lookup by id names its partition and PostgreSQL probes one index.

There is no DEFAULT partition (creating a day's partition would have to scan it). Days are created
ahead by the sweeper (:func:`maintain_partitions`, once an hour) and, for a row whose day has none
(a v7 id from another clock, an old ``created_at``), by the writer when PostgreSQL refuses the row.
Retention detaches a whole day's partition and drops it: no mass ``DELETE``, no bloat.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from contract.errors import DragomanError
from storage.connection import AsyncPostgresConnection, DatabaseUnavailableError

AHEAD_DAYS = 3
"""Days after today whose partitions are kept created (migration 0022 creates as many)."""

_EPOCH = datetime.date(1970, 1, 1)
_MS_PER_DAY = 86_400_000
_V7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_NAME = re.compile(r"jobs_d(\d{8})")
_BOUND = re.compile(r"FOR VALUES FROM \('(\d{4}-\d{2}-\d{2})'\) TO \('(\d{4}-\d{2}-\d{2})'\)")

# One creator of partitions at a time (writers, sweepers, the CLI): an advisory lock on this key.
_PARTITION_LOCK_KEY = int.from_bytes(b"jobsdays", "big")


class PartitionError(DragomanError):
    """A partition of ``jobs`` could not be created or dropped (the message says which and why)."""


def job_day(job_id: str) -> datetime.date | None:
    """The ``created_day`` of the row of ``job_id`` if the id says it (a UUID version 7), else ``None``.

    The same rule as the SQL function ``jobs_created_day`` for a v7 id: the UTC day of its first
    48 bits (milliseconds since the epoch). ``job_id`` is a canonical lower-case UUID (what
    dragoman stores and returns); any other form, or a v7 timestamp past year 9999, is ``None``:
    the caller then looks in every partition.
    """
    if not _V7.fullmatch(job_id):
        return None
    millis = int(job_id[:8] + job_id[9:13], 16)
    try:
        return _EPOCH + datetime.timedelta(days=millis // _MS_PER_DAY)
    except OverflowError:
        return None


def day_bounds(job_id: str) -> tuple[datetime.date, datetime.date]:
    """The ``created_day`` range the row of ``job_id`` can be in, for ``created_day BETWEEN %s AND %s``.

    One day for a v7 id (PostgreSQL reads that day's partition alone), every day for another id:
    one statement serves both.
    """
    day = job_day(job_id)
    return (datetime.date.min, datetime.date.max) if day is None else (day, day)


def partition_name(day: datetime.date) -> str:
    """The name of ``day``'s partition of ``jobs``: ``jobs_dYYYYMMDD``."""
    return f"jobs_d{day:%Y%m%d}"


@dataclass(frozen=True, slots=True)
class Partition:
    """One attached partition of ``jobs``: its name and the days it holds (``start`` included, ``end`` not)."""

    name: str
    start: datetime.date
    end: datetime.date


@dataclass(slots=True)
class PartitionReport:
    """What :func:`maintain_partitions` created and dropped (or would have, for a dry run)."""

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


async def list_partitions(conn: Any) -> list[Partition]:
    """The attached day partitions of ``jobs``, oldest first (a partition being detached is left out)."""
    cursor = await conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'jobs'::regclass AND NOT i.inhdetachpending"
    )
    partitions = []
    for name, bound in await cursor.fetchall():
        match = _BOUND.fullmatch(bound or "")
        if match:  # a range of days; anything else (a DEFAULT partition made by hand) is not ours to drop
            start, end = (datetime.date.fromisoformat(text) for text in match.groups())
            partitions.append(Partition(name, start, end))
    return sorted(partitions, key=lambda partition: partition.start)


async def create_partitions(conn: Any, days: Iterable[datetime.date]) -> list[str]:
    """Create the partitions of those of ``days`` that have none; return the names created.

    Raises :class:`PartitionError` when PostgreSQL refuses (the message says why) and
    :class:`~storage.connection.DatabaseUnavailableError` when it cannot be reached. ``conn`` is an
    autocommit connection. Each day is created as a plain table and then attached,
    which locks ``jobs`` in SHARE UPDATE EXCLUSIVE mode only (``CREATE TABLE ... PARTITION OF``
    would take ACCESS EXCLUSIVE and wait for every reader): writers and readers go on meanwhile.
    Creators take turns on an advisory lock, so two writers missing the same day create it once.
    """
    import psycopg

    wanted = sorted(set(days))
    if not wanted:
        return []
    created = []
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PARTITION_LOCK_KEY,))
            covered = await list_partitions(conn)
            for day in wanted:
                if any(partition.start <= day < partition.end for partition in covered):
                    continue
                name = partition_name(day)
                following = day + datetime.timedelta(days=1)
                await conn.execute(f"CREATE TABLE {name} (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
                await conn.execute(
                    f"ALTER TABLE jobs ATTACH PARTITION {name} "
                    f"FOR VALUES FROM ('{day.isoformat()}') TO ('{following.isoformat()}')"
                )
                created.append(name)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError.from_driver(exc) from exc
    except psycopg.Error as exc:
        raise PartitionError(f"could not create the jobs partitions of {wanted[0]}..{wanted[-1]}: {exc}") from exc
    return created


async def maintain_partitions(
    conn: Any, retention_days: int | None, *, today: datetime.date | None = None, dry_run: bool = False
) -> PartitionReport:
    """Create today's and the next :data:`AHEAD_DAYS` days' partitions; drop those older than ``retention_days``.

    A partition is dropped when every day it holds is before ``today - retention_days`` (UTC):
    with ``retention_days=30`` the rows of the last 30 days and today stay. It is detached with
    ``DETACH PARTITION ... CONCURRENTLY`` (``jobs`` stays readable and writable; it waits for the
    statements already using the partition) and then dropped. A detach left half done by an
    interrupted run is finished first. ``retention_days=None`` drops nothing. ``dry_run`` changes
    nothing and reports what would be created and dropped. ``conn`` must be an autocommit connection
    (a concurrent detach cannot run inside a transaction).
    """
    import psycopg

    if today is None:
        today = datetime.datetime.now(datetime.UTC).date()
    report = PartitionReport()
    ahead = [today + datetime.timedelta(days=n) for n in range(AHEAD_DAYS + 1)]
    partitions = await list_partitions(conn)
    if dry_run:
        report.created = [partition_name(day) for day in ahead if not any(p.start <= day < p.end for p in partitions)]
    else:
        report.created = await create_partitions(conn, ahead)
    if retention_days is None:
        return report
    cutoff = today - datetime.timedelta(days=retention_days)
    expired = [partition.name for partition in partitions if partition.end <= cutoff]
    if dry_run:
        report.dropped = expired
        return report
    try:
        for name in await _pending_detaches(conn):
            await conn.execute(f"ALTER TABLE jobs DETACH PARTITION {name} FINALIZE")
            await conn.execute(f"DROP TABLE {name}")
            report.dropped.append(name)
        for name in expired:
            await conn.execute(f"ALTER TABLE jobs DETACH PARTITION {name} CONCURRENTLY")
            await conn.execute(f"DROP TABLE {name}")
            report.dropped.append(name)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError.from_driver(exc) from exc
    except psycopg.Error as exc:
        raise PartitionError(f"could not drop the expired jobs partitions {expired}: {exc}") from exc
    return report


async def _pending_detaches(conn: Any) -> list[str]:
    """Partitions whose ``DETACH ... CONCURRENTLY`` was interrupted (they must be finalized before anything else)."""
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'jobs'::regclass AND i.inhdetachpending"
    )
    return [row[0] for row in await cursor.fetchall()]


async def run_maintenance(database_url: str, retention_days: int | None, *, dry_run: bool = False) -> PartitionReport:
    """:func:`maintain_partitions` on a connection of its own (the sweeper's and ``dragoman db retention``'s door).

    Raises :class:`~storage.connection.DatabaseUnavailableError` when PostgreSQL cannot be reached
    and :class:`PartitionError` when a partition cannot be created or dropped.
    """
    connection = AsyncPostgresConnection(database_url)
    try:
        return await maintain_partitions(await connection.get(), retention_days, dry_run=dry_run)
    finally:
        await connection.close()
