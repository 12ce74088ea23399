"""Usage per tenant: the ``usage_daily`` table, read by day and model for ``GET /v1/usage`` and ``dragoman usage``.

The worker's upsert (``storage/jobs.py``'s ``UPSERT_SQL``) adds every finished job to
``usage_daily`` in the same statement that writes its row, keyed by tenant, the UTC day the job
finished, the model that answered and the final status. What a job counts: one job, the characters
of its source text (Unicode code points, as ``len()`` counts them), the prompt and output tokens the
engine reported. Every final status is counted; ``succeeded_characters`` is what was translated.
Jobs not submitted through the HTTP API have no tenant: they are counted under ``tenant=None``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from storage.connection import AsyncConnectionPool

GROUPINGS = ("day", "model")
"""What usage may be grouped by, besides the tenant."""


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One tenant's usage for one group: a day, a model, both, or the whole range (``None`` where not grouped)."""

    tenant: str | None  # None: jobs not submitted through the HTTP API
    day: dt.date | None
    model: str | None
    succeeded: int
    failed: int
    cancelled: int
    characters: int  # source characters of every finished job
    succeeded_characters: int  # source characters of the succeeded jobs: what was translated
    prompt_tokens: int
    output_tokens: int

    @property
    def jobs(self) -> int:
        """Finished jobs, every status."""
        return self.succeeded + self.failed + self.cancelled


def range_start(last: dt.date, days: int) -> dt.date:
    """The first day of the ``days``-day range that ends on ``last`` (included): the calendar's first day,
    1 January of year 1, where the range would start before it (``last - timedelta`` raises ``OverflowError``)."""
    if last.toordinal() - (days - 1) < dt.date.min.toordinal():
        return dt.date.min
    return last - dt.timedelta(days=days - 1)


def usage_sql(group_by: tuple[str, ...], tenant_filter: bool) -> str:
    """The usage query grouped by tenant and ``group_by``; parameters: start, end (and the tenant)."""
    day = "day" if "day" in group_by else "NULL::date"
    model = "model" if "model" in group_by else "NULL::text"
    where = "day BETWEEN %s AND %s" + (" AND tenant = %s" if tenant_filter else "")
    return (
        f"SELECT tenant, {day}, {model}, "
        "sum(jobs) FILTER (WHERE status = 'succeeded'), sum(jobs) FILTER (WHERE status = 'failed'), "
        "sum(jobs) FILTER (WHERE status = 'cancelled'), sum(characters), "
        "sum(characters) FILTER (WHERE status = 'succeeded'), sum(prompt_tokens), sum(output_tokens) "
        f"FROM usage_daily WHERE {where} GROUP BY 1, 2, 3 HAVING sum(jobs) <> 0 ORDER BY 1, 2, 3"
    )


def _int(value: Any) -> int:
    return 0 if value is None else int(value)


class UsageStore:
    """Reads of ``usage_daily`` on a connection pool (the API's, or one of the CLI's own)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def usage(
        self,
        start: dt.date,
        end: dt.date,
        *,
        tenant: str | None = None,
        all_tenants: bool = False,
        group_by: tuple[str, ...] = ("day",),
    ) -> list[UsageRow]:
        """Usage from ``start`` to ``end`` (UTC days, both included) per tenant and ``group_by``, ordered.

        ``tenant`` selects one tenant (``None``: the jobs not submitted through the HTTP API) unless
        ``all_tenants``. A group with no finished job is left out. Raises
        :class:`~storage.connection.DatabaseUnavailableError` when PostgreSQL cannot be reached.
        """
        unknown = set(group_by) - set(GROUPINGS)
        if unknown:
            raise ValueError(f"usage is grouped by {', '.join(GROUPINGS)}, not {', '.join(sorted(unknown))}")
        params: tuple[Any, ...] = (start, end) if all_tenants else (start, end, tenant or "")
        async with self._pool.connection() as conn:
            cursor = await conn.execute(usage_sql(group_by, not all_tenants), params)
            rows = await cursor.fetchall()
        return [
            UsageRow(
                tenant=row[0] or None,
                day=row[1],
                model=row[2] or None,
                succeeded=_int(row[3]),
                failed=_int(row[4]),
                cancelled=_int(row[5]),
                characters=_int(row[6]),
                succeeded_characters=_int(row[7]),
                prompt_tokens=_int(row[8]),
                output_tokens=_int(row[9]),
            )
            for row in rows
        ]
