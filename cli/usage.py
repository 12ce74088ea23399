"""``dragoman usage``: every tenant's finished jobs, characters and tokens by UTC day and/or model, for the operator."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json

from cli.help import add_command, examples
from contract.errors import InvalidJobError
from contract.settings import Settings

EXIT_OK = 0
NO_TENANT = "(none)"  # how the table shows jobs not submitted through the HTTP API


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dragoman usage``."""
    usage = add_command(
        sub,
        "usage",
        help="jobs, characters and tokens per tenant, by day and model",
        description=(
            "Finished jobs (by status), their source characters and tokens, per tenant and UTC day (or model), "
            "read from PostgreSQL (the worker counts each job when it writes its row). Jobs not submitted "
            f"through the HTTP API have no tenant: {NO_TENANT} here, null in --json. The HTTP API's "
            "GET /v1/usage answers the same for the caller's own tenant."
        ),
        epilog=examples(
            "dragoman usage",
            "dragoman usage --tenant acme --from 2026-11-01 --to 2026-11-30 --group-by day,model",
            "dragoman usage --group-by model --json",
        ),
    )
    usage.add_argument("--tenant", help="only this tenant ('' for the jobs that have none)")
    usage.add_argument(
        "--from", dest="start", metavar="DATE", help="first UTC day, YYYY-MM-DD (default: 29 days before --to)"
    )
    usage.add_argument("--to", dest="end", metavar="DATE", help="last UTC day, YYYY-MM-DD, included (default: today)")
    usage.add_argument("--group-by", default="day", help="day (default), model, day,model, or none: the whole range")
    usage.add_argument("--json", action="store_true", help="print JSON")
    usage.set_defaults(func=cmd_usage)


def _date(value: str | None, flag: str) -> dt.date | None:
    if value is None:
        return None
    try:
        if len(value) != 10:  # fromisoformat also takes 20261101 and week dates
            raise ValueError(value)
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidJobError(f"{flag} takes a date as YYYY-MM-DD, got {value!r}") from None


def _grouping(value: str) -> tuple[str, ...]:
    from storage.usage import GROUPINGS

    if value == "none":
        return ()
    parts = [part.strip() for part in value.split(",")]
    if any(part not in GROUPINGS for part in parts) or len(set(parts)) != len(parts):
        raise InvalidJobError(f"--group-by takes day, model, day,model or none, got {value!r}")
    return tuple(g for g in GROUPINGS if g in parts)


def cmd_usage(args: argparse.Namespace, settings: Settings) -> int:
    """Print usage per tenant as a table, or as JSON."""
    from storage.embedded import resolve_urls
    from storage.usage import range_start

    last = _date(args.end, "--to") or dt.datetime.now(dt.UTC).date()
    first = _date(args.start, "--from") or range_start(last, 30)  # 0001-01-01 at the earliest
    if last < first:
        raise InvalidJobError(f"--to ({last}) is before --from ({first})")
    grouping = _grouping(args.group_by)
    return asyncio.run(_run(args, resolve_urls(settings).database_url, first, last, grouping))


async def _run(
    args: argparse.Namespace, database_url: str, first: dt.date, last: dt.date, grouping: tuple[str, ...]
) -> int:
    from storage import AsyncConnectionPool
    from storage.usage import UsageStore

    pool = AsyncConnectionPool(database_url, max_connections=1)
    try:
        rows = await UsageStore(pool).usage(
            first, last, tenant=args.tenant, all_tenants=args.tenant is None, group_by=grouping
        )
    finally:
        await pool.close()
    if args.json:
        print(
            json.dumps(
                {
                    "start": str(first),
                    "end": str(last),
                    "group_by": list(grouping),
                    "data": [
                        {
                            "tenant": r.tenant,
                            "day": None if r.day is None else str(r.day),
                            "model": r.model,
                            "jobs": r.jobs,
                            "succeeded": r.succeeded,
                            "failed": r.failed,
                            "cancelled": r.cancelled,
                            "characters": r.characters,
                            "succeeded_characters": r.succeeded_characters,
                            "prompt_tokens": r.prompt_tokens,
                            "output_tokens": r.output_tokens,
                        }
                        for r in rows
                    ],
                },
                indent=2,
            )
        )
        return EXIT_OK
    if not rows:
        print(f"no finished jobs from {first} to {last}")
        return EXIT_OK
    print(
        f"{'tenant':<24} {'day':<10} {'model':<24} {'jobs':>9} {'succeeded':>9} {'failed':>7} {'cancelled':>9} "
        f"{'characters':>12} {'prompt tok':>11} {'output tok':>11}"
    )
    for r in rows:
        day = "-" if r.day is None else str(r.day)
        print(
            f"{r.tenant or NO_TENANT:<24} {day:<10} {r.model or '-':<24} {r.jobs:>9,} {r.succeeded:>9,} "
            f"{r.failed:>7,} {r.cancelled:>9,} {r.characters:>12,} {r.prompt_tokens:>11,} {r.output_tokens:>11,}"
        )
    return EXIT_OK
