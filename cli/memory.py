"""``dragoman memory stats|purge``: what the translation memory holds, and emptying it."""

from __future__ import annotations

import argparse
import asyncio
import json

from cli.help import add_command, choices, examples
from contract.errors import InvalidJobError
from contract.settings import Settings

EXIT_OK = 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dragoman memory``."""
    memory = add_command(
        sub,
        "memory",
        help="the translation memory: stats, purge",
        description=choices(
            "Exact repeats are served from the translation memory in PostgreSQL instead of the engine "
            "(DRAGOMAN_MEMORY_ENABLED, default on; a job can opt out with memory=false). Entries are keyed by "
            "model revision and profile version, so a new model never sees old ones; they expire after "
            "DRAGOMAN_MEMORY_MAX_AGE_DAYS and past DRAGOMAN_MEMORY_MAX_ENTRIES. Each API tenant has a memory of "
            "its own (jobs without a tenant share one) unless DRAGOMAN_MEMORY_SCOPE=shared.",
            ("stats", "entries, hits and text size per tenant, model and profile (--tenant: one tenant's)"),
            ("purge", "delete entries: all, or those of --tenant, --model and/or older than --older-than-days"),
        ),
        epilog=examples(
            "dragoman memory stats",
            "dragoman memory purge --model gemma-3-270m@0123456789abcdef",
            "dragoman memory purge --older-than-days 7",
            "dragoman memory stats --tenant acme",
            "dragoman memory purge --tenant acme",
        ),
    )
    memory.add_argument("action", choices=["stats", "purge"], help="stats or purge (see above)")
    memory.add_argument("--model", help="for purge: only this model (as stats shows it, name@revision)")
    memory.add_argument("--older-than-days", type=float, help="for purge: only entries created longer ago")
    memory.add_argument(
        "--tenant",
        help="only this API tenant's memory ('' for the memory of jobs without a tenant, and of a shared one)",
    )
    memory.add_argument("--json", action="store_true", help="for stats: print JSON")
    memory.set_defaults(func=cmd_memory)


def cmd_memory(args: argparse.Namespace, settings: Settings) -> int:
    """Print the memory's statistics, or purge it."""
    from storage.embedded import resolve_urls

    if args.older_than_days is not None and args.older_than_days < 0:
        raise InvalidJobError("--older-than-days takes a number of days, 0 or more")
    if args.action == "stats" and (args.model is not None or args.older_than_days is not None):
        raise InvalidJobError("--model and --older-than-days select what `purge` deletes; stats shows everything")
    return asyncio.run(_run(args, resolve_urls(settings).database_url))


async def _run(args: argparse.Namespace, database_url: str) -> int:
    from storage.memory import MemoryStore

    store = MemoryStore(database_url)
    try:
        if args.action == "purge":
            older = None if args.older_than_days is None else args.older_than_days * 86_400
            deleted = await store.purge(model=args.model, older_than_seconds=older, tenant=args.tenant)
            print(f"deleted {deleted:,} translation memory entries")
            return EXIT_OK
        stats = await store.stats(tenant=args.tenant)
    finally:
        await store.close()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "tenant": s.tenant,
                        "model": s.model,
                        "profile": s.profile,
                        "entries": s.entries,
                        "hits": s.hits,
                        "text_bytes": s.text_bytes,
                        "oldest": None if s.oldest is None else s.oldest.isoformat(),
                        "last_used": None if s.last_used is None else s.last_used.isoformat(),
                    }
                    for s in stats
                ],
                indent=2,
            )
        )
        return EXIT_OK
    if not stats:
        print("the translation memory is empty" if args.tenant is None else "this tenant's translation memory is empty")
        return EXIT_OK
    print(f"{'tenant':<20} {'model':<40} {'profile':<16} {'entries':>10} {'hits':>10} {'text':>10}  oldest")
    for s in stats:
        oldest = "-" if s.oldest is None else s.oldest.strftime("%Y-%m-%d %H:%M")
        tenant = s.tenant or "-"
        print(
            f"{tenant:<20} {s.model:<40} {s.profile:<16} {s.entries:>10,} {s.hits:>10,} "
            f"{_size(s.text_bytes):>10}  {oldest}"
        )
    return EXIT_OK


def _size(n: int) -> str:
    """Bytes as B, kB, MB or GB (powers of 1,000)."""
    if n < 1000:
        return f"{n} B"
    size = float(n)
    for unit in ("kB", "MB", "GB"):
        size /= 1000
        if size < 1000 or unit == "GB":
            break
    return f"{size:.1f} {unit}"
