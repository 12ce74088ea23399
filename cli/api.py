"""``dragoman api`` (the HTTP API on uvicorn) and ``dragoman api-key create|list|revoke``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from cli.help import EXAMPLE_ID, add_command, choices, examples
from cli.setting_flags import mirror_settings
from contract.log_format import LOG_FORMATS, configure_logging
from contract.settings import Settings

if TYPE_CHECKING:
    from storage import ApiKey, ApiKeyStore

T = TypeVar("T")
log = logging.getLogger(__name__)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``api`` and ``api-key`` on the ``dragoman`` parser."""
    api = add_command(
        sub,
        "api",
        help="serve the HTTP API (DRAGOMAN_API_HOST:DRAGOMAN_API_PORT, default 127.0.0.1:8000)",
        description=(
            "Serve the HTTP API on uvicorn: submit, look up and cancel jobs with an API key "
            "(`dragoman api-key create`). Stateless: run several behind a load balancer. It connects to "
            "DRAGOMAN_REDIS_URL / DRAGOMAN_DATABASE_URL, or to the running embedded servers."
        ),
        epilog=examples("dragoman api", "dragoman api --host 0.0.0.0 --port 8080 --log-format json"),
    )
    api.add_argument("--host", dest="api_host", metavar="HOST", help="address to listen on (default DRAGOMAN_API_HOST)")
    api.add_argument(
        "--port", dest="api_port", metavar="PORT", type=int, help="port to listen on (default DRAGOMAN_API_PORT)"
    )
    api.add_argument("--log-format", choices=LOG_FORMATS, help="text or json (default DRAGOMAN_LOG_FORMAT)")
    mirror_settings(api, "api_host", "api_port", "log_format")
    api.set_defaults(func=cmd_api)

    keys = add_command(
        sub,
        "api-key",
        help="API keys of the HTTP API: create NAME, list, revoke ID",
        description=choices(
            "Manage the HTTP API's keys. Each key is a tenant's: it sees and cancels only that tenant's jobs.",
            ("create", "make a key named NAME and print it (shown once; only its hash is stored)"),
            ("list", "show the keys (id, name, tenant, created, revoked), never the secrets"),
            ("revoke", "stop the key with id ID from working, at once; its jobs are kept"),
        ),
        epilog=examples(
            "dragoman api-key create billing-service --tenant billing",
            "dragoman api-key list --all",
            f"dragoman api-key revoke {EXAMPLE_ID}",
        ),
    )
    keys.add_argument("action", choices=["create", "list", "revoke"], help="what to do (see above)")
    keys.add_argument("ident", nargs="?", help="create: the key's name; revoke: the key's id")
    keys.add_argument("--tenant", help="create: the tenant whose jobs the key sees (default: the name)")
    keys.add_argument("--rate-limit", type=int, help="create: requests per minute (default DRAGOMAN_API_RATE_LIMIT...)")
    keys.add_argument(
        "--max-queued-jobs",
        type=int,
        help="create: unfinished jobs the key's tenant may have (default DRAGOMAN_API_MAX_QUEUED_JOBS)",
    )
    keys.add_argument(
        "--weight",
        type=int,
        default=1,
        help="create: the tenant's share of each lane against other tenants' (default 1; 3: three times as many "
        "jobs per turn while several tenants wait)",
    )
    keys.add_argument("--all", action="store_true", help="list: revoked keys too")
    keys.add_argument("--json", action="store_true", help="print JSON")
    keys.set_defaults(func=cmd_api_key)


GRACEFUL_SHUTDOWN_SECONDS = 10


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    """Resolve the services (embedded ones if no URLs are set), then serve the API until SIGTERM/SIGINT.

    The connection limits (``api.server_limits``) are sized against the open-file limit, raised to its hard
    limit first, and logged before the server starts.
    """
    import uvicorn

    from api import create_app
    from api.server_limits import ConnectionLimits, LimitedConfig, raise_open_file_limit
    from storage.embedded import resolve_urls

    configure_logging("INFO", settings.log_format)
    urls = resolve_urls(settings)
    settings = settings.model_copy(update={"redis_url": urls.redis_url, "database_url": urls.database_url})
    limits = ConnectionLimits.from_settings(settings, raise_open_file_limit())
    log.info("%s", limits.describe())
    if limits.files_needed > limits.open_file_limit:
        log.warning(
            "the connection limits may need %s descriptors, over the open-file limit of %s: raise `ulimit -n` "
            "or lower DRAGOMAN_API_MAX_CONNECTIONS / DRAGOMAN_API_MAX_REQUESTS_IN_FLIGHT",
            f"{limits.files_needed:,}",
            f"{limits.open_file_limit:,}",
        )
    # Event streams never end by themselves: without a bound, a SIGTERM would wait for ever and the
    # application's shutdown (which releases batches being created) would never run.
    config = LimitedConfig(
        create_app(settings),
        limits,
        host=settings.api_host,
        port=settings.api_port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


def cmd_api_key(args: argparse.Namespace, settings: Settings) -> int:
    """Create (printing the key once), list or revoke API keys."""
    from contract.sync_bridge import run_sync
    from storage.embedded import resolve_urls

    if args.action == "create" and not args.ident:
        raise ValueError("api-key create needs a name: dragoman api-key create NAME [--tenant T]")
    if args.action == "revoke" and not args.ident:
        raise ValueError("api-key revoke needs the key's id (see `dragoman api-key list`)")
    database_url = resolve_urls(settings).database_url
    if args.action == "create":
        key, secret = run_sync(
            _on_store(
                database_url,
                lambda store: store.create(
                    args.ident,
                    tenant=args.tenant,
                    rate_limit_per_minute=args.rate_limit,
                    max_queued_jobs=args.max_queued_jobs,
                    weight=args.weight,
                ),
            )
        )
        if args.json:
            print(json.dumps({"id": key.id, "name": key.name, "tenant": key.tenant, "key": secret}))
        else:
            print(secret)
            print(f"(id {key.id}, tenant {key.tenant}; the key is shown this once and stored only hashed)")
        return 0
    if args.action == "revoke":
        key = run_sync(_on_store(database_url, lambda store: store.revoke(args.ident)))
        print(f"revoked {key.id} ({key.name}, tenant {key.tenant})")
        _announce_revocation(settings, key.id)
        return 0
    keys = run_sync(_on_store(database_url, lambda store: store.list(include_revoked=args.all)))
    if args.json:
        print(json.dumps([_key_json(key) for key in keys]))
        return 0
    print(
        f"{'id':36}  {'name':16}  {'tenant':16}  {'prefix':12}  {'rate/min':>8}  {'queued':>9}  {'weight':>6}  created"
    )
    for key in keys:
        rate = str(key.rate_limit_per_minute or "default")
        queued = str(key.max_queued_jobs or "default")
        revoked = "" if key.active else f"  revoked {key.revoked_at:%Y-%m-%d %H:%M}"
        print(
            f"{key.id:36}  {key.name:16}  {key.tenant:16}  {key.prefix:12}  {rate:>8}  {queued:>9}  {key.weight:>6}  "
            f"{key.created_at:%Y-%m-%d %H:%M}{revoked}"
        )
    return 0


async def _on_store(database_url: str, operation: Callable[[ApiKeyStore], Awaitable[T]]) -> T:
    """``operation`` on an :class:`~storage.ApiKeyStore` of one connection, closed afterwards (one command's work)."""
    from storage import ApiKeyStore, AsyncConnectionPool

    pool = AsyncConnectionPool(database_url, max_connections=1)
    try:
        return await operation(ApiKeyStore(pool))
    finally:
        await pool.close()


def _announce_revocation(settings: Settings, key_id: str) -> None:
    """Tell the API servers at once; without Redis they refuse the key once their cache expires.

    Through :func:`broker.redis_client.open_redis`, so a Redis Cluster URL (``redis+cluster://``) works too.
    """
    import redis
    from redis.exceptions import RedisClusterException

    from api.key_cache import CACHE_SECONDS, announce_revocation
    from broker.keys import RedisKeys
    from broker.redis_client import open_redis
    from contract.sync_bridge import run_sync
    from storage.embedded import resolve_urls

    async def announce() -> None:
        client = open_redis(resolve_urls(settings).redis_url, socket_timeout=5)
        try:
            await announce_revocation(client, RedisKeys.from_settings(settings), key_id)
        finally:
            await client.aclose()

    try:
        run_sync(announce())
    except (redis.RedisError, RedisClusterException) as exc:
        print(
            f"warning: Redis is unreachable ({exc}); API servers that used this key lately accept it "
            f"for up to {CACHE_SECONDS:.0f} s more",
            file=sys.stderr,
        )


def _key_json(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "name": key.name,
        "tenant": key.tenant,
        "prefix": key.prefix,
        "rate_limit_per_minute": key.rate_limit_per_minute,
        "max_queued_jobs": key.max_queued_jobs,
        "weight": key.weight,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
    }
