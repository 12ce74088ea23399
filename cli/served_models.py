"""``dragoman served-models list|forget``: the names workers have served, and forgetting retired ones."""

from __future__ import annotations

import argparse
import asyncio
import json

from broker.keys import RedisKeys
from broker.model_registry import forget_model_names, read_served_names
from cli.help import add_command, choices, examples
from contract.errors import InvalidJobError
from contract.settings import Settings
from contract.wording import counted

EXIT_OK = 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dragoman served-models``."""
    served = add_command(
        sub,
        "served-models",
        help="the model names workers have served: list, forget",
        description=choices(
            "A worker registers its --served-model-name(s) when it starts, and producers accept jobs naming them "
            "from then on, even while no worker of that model runs (their jobs wait). The first worker also pins "
            "the deployment's default model (DRAGOMAN_DEFAULT_MODEL), which every process must agree on.",
            ("list", "every registered name, the model it names, and the pinned default model"),
            ("forget", "forget NAMEs (a retired model, a mistyped alias; forgetting the default unpins it)"),
        ),
        epilog=examples("dragoman served-models list", "dragoman served-models forget hy-mt-old"),
    )
    served.add_argument("action", choices=["list", "forget"], help="list or forget (see above)")
    served.add_argument("names", nargs="*", metavar="NAME", help="for forget: the names to forget")
    served.add_argument("--json", action="store_true", help="for list: print JSON")
    served.set_defaults(func=cmd_served_models)


def cmd_served_models(args: argparse.Namespace, settings: Settings) -> int:
    """List or forget served model names."""
    from storage.embedded import resolve_urls

    if args.action == "forget" and not args.names:
        raise InvalidJobError("forget needs the NAMEs to forget (`dragoman served-models list` shows them)")
    if args.action == "list" and args.names:
        raise InvalidJobError("list takes no NAME (forget does)")
    return asyncio.run(_run(args, resolve_urls(settings).redis_url, RedisKeys.from_settings(settings)))


async def _run(args: argparse.Namespace, redis_url: str, keys: RedisKeys) -> int:
    from broker.redis_client import open_redis

    connection = open_redis(redis_url, socket_timeout=10)
    try:
        if args.action == "forget":
            forgotten = await forget_model_names(connection, keys, args.names)
            print(f"forgot {forgotten} of {counted(len(args.names), 'name')}")
            return EXIT_OK
        names, pinned = await read_served_names(connection, keys)
    finally:
        await connection.aclose()
    if args.json:
        print(json.dumps({"default_model": pinned, "names": names}, indent=2))
        return EXIT_OK
    print(f"default model: {pinned or '(not pinned yet: no worker has started)'}")
    for name, model in sorted(names.items()):
        print(f"  {name:<40} {'its own model' if name == model else 'alias of ' + model}")
    return EXIT_OK
