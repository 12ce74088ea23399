"""The application factory: ``create_app(settings)`` builds the API that ``dragoman api`` serves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.body_timeout import BodyReadTimeout
from api.cpu_work import CpuWork
from api.deepl_glossary_entries import MAX_GLOSSARY_BYTES
from api.door_bodies import add_door_bodies
from api.errors import install_error_handlers
from api.event_feed import EventFeed
from api.file_sweeper import FileSweeper
from api.input_check import InputCheck
from api.joined_requests import JoinedRequests
from api.key_cache import ApiKeyCache
from api.libretranslate_cors import LibreTranslateCors
from api.limits import BodySizeLimit
from api.ratelimit import RateLimiter
from api.routes import (
    batches,
    console,
    deepl,
    deepl_v3_glossaries,
    documents,
    events,
    files,
    health,
    history,
    jobs,
    libretranslate,
    models,
    runs,
)
from api.routes import usage as usage_routes
from api.services import ApiServices, Readiness
from api.unknown_keys import UnknownKeyLimiter
from broker.orchestration import orchestration_redis_url
from broker.queued_limit import QueuedJobLimit
from contract.errors import ConfigurationError
from contract.settings import Settings
from producer import AsyncClient
from storage import (
    ApiKeyStore,
    AsyncBatchStore,
    AsyncConnectionPool,
    GlossaryQuota,
    GlossaryStore,
    PostgresFileStore,
)
from storage.history import HistoryStore
from storage.usage import UsageStore
from tenancy.batches import BatchService
from tenancy.history import TenantHistory
from tenancy.tenant_groups import TenantGroups

DESCRIPTION = """\
Translation jobs over HTTP: submit one or many, look them up by id, wait for them, cancel them;
JSONL runs (results streamed back in input order) and documents (`.txt`, `.md`, `.html`, returned
with their structure); completion events as Server-Sent Events (`/v1/events`, resumable with
`Last-Event-ID`).

Every route but `/healthz` needs `Authorization: Bearer <key>` (`dragoman api-key create`).
Errors are `{"error": {"code": ..., "message": ...}}`.

`/v1/files` and `/v1/batches` are OpenAI's Batch API (point the `openai` SDK at `<this server>/v1`);
their errors are OpenAI's shape. `/translate`, `/languages`, `/detect` and `/translate_file` are
LibreTranslate's API (key as `api_key` in the body, or Bearer; errors `{"error": ...}`).
`/v1/models` (OpenAI's shape too) lists the models a job may name
(`model`), with their aliases, routing rules and live workers.

`/v2/...` is DeepL's API v2 (`DeepL-Auth-Key <key>`; point the `deepl` SDK's `server_url` here), with
`/v3/glossaries` (its multilingual glossaries), and
`/translate`, `/languages`, `/detect`, `/translate_file` are LibreTranslate's (`api_key` in the body):
the tools translators use (Weblate, CAT tools) can use dragoman as either. `/` is the web console.
"""


def create_app(settings: Settings) -> FastAPI:
    """The FastAPI application on the services ``settings`` names (both URLs must be set).

    Nothing is connected until the application starts (its lifespan opens one
    :class:`~producer.AsyncClient` and closes it at shutdown); the process keeps no other state.
    """
    if not settings.redis_url or not settings.database_url:
        raise ConfigurationError(
            "the API needs DRAGOMAN_REDIS_URL and DRAGOMAN_DATABASE_URL (or resolved embedded URLs)"
        )
    orchestration_redis_url(settings)  # documents and webhooks go through RQ: no server for it fails here, at start

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Every pool is sized by a setting and waits DRAGOMAN_API_POOL_WAIT_SECONDS for a free
        # connection: a burst queues; only a wait past that is answered 503 server_busy.
        wait_s = settings.api_pool_wait_seconds
        client = AsyncClient(
            settings,
            max_connections=settings.api_database_connections,
            redis_connections=settings.api_redis_connections,
            pool_wait_s=wait_s,
        )
        pool = AsyncConnectionPool(
            settings.database_url or "", max_connections=settings.api_database_connections, acquire_timeout_s=wait_s
        )
        # Uploads (spooled first: a connection only writes bytes that have all arrived) and downloads
        # (a connection per chunk) have a pool of their own, so files cannot take the others' connections.
        file_pool = AsyncConnectionPool(
            settings.database_url or "", max_connections=settings.api_file_store_connections, acquire_timeout_s=wait_s
        )
        readiness = Readiness(settings.database_url or "")
        file_store = PostgresFileStore(file_pool)
        queued = QueuedJobLimit(client.redis, client.keys, settings.state_ttl_seconds)
        batch_service = BatchService(
            client,
            file_store,
            AsyncBatchStore(pool),
            queued,
            create_wait_seconds=settings.api_batch_create_wait_seconds,
        )
        feed = EventFeed(
            settings.redis_url or "",
            client.keys,
            settings.api_max_event_streams,
            settings.api_max_event_streams_per_key,
        )
        work = CpuWork(settings.api_busy_retry_after_seconds)
        joined = JoinedRequests(settings.api_retry_join_seconds)
        app.state.services = ApiServices(
            settings=settings,
            client=client,
            api_keys=ApiKeyCache(ApiKeyStore(pool)),
            limiter=RateLimiter(client.redis, client.keys),
            files=file_store,
            batches=batch_service,
            groups=TenantGroups(client.groups, file_store, queued),
            events=feed,
            queued=queued,
            readiness=readiness,
            work=work,
            joined=joined,
            unknown_keys=UnknownKeyLimiter(client.redis, client.keys, settings.api_unknown_key_limit_per_minute),
        )
        app.state.usage = UsageStore(pool)  # GET /v1/usage
        # /v2/glossaries, the DeepL-compatible door; each tenant's glossaries held to their quota
        glossary_quota = GlossaryQuota(settings.glossary_quota_count, settings.glossary_quota_bytes)
        app.state.glossaries = GlossaryStore(pool, glossary_quota)
        # GET /v1/jobs, /v1/runs, /v1/documents and the retries (the web console's history)
        app.state.history = TenantHistory(client.redis, client.keys, HistoryStore(pool))
        sweeper = FileSweeper(file_store, settings.sweep_interval_seconds)
        sweeper.start()
        try:
            yield
        finally:
            await joined.close()  # first: its cancelled jobs need the client
            await sweeper.close()
            await batch_service.close()
            await feed.close()
            await readiness.close()
            await client.close()
            await file_pool.close()
            await pool.close()
            work.close()

    app = FastAPI(title="dragoman", version="1", description=DESCRIPTION, lifespan=lifespan)
    install_error_handlers(app)
    # A multipart upload carries its form fields and boundaries around the file: 64 KiB of room.
    # A document is at most DRAGOMAN_MAX_DOCUMENT_CHARS characters: up to 4 bytes each in UTF-8.
    uploads = {
        "/v1/files": settings.max_file_bytes + 64 * 1024,
        "/v1/runs": settings.max_file_bytes,
        "/v1/documents": settings.max_document_chars * 4,
        "/translate_file": settings.max_document_chars * 4 + 64 * 1024,  # LibreTranslate's multipart upload
        "/v2/document": settings.max_document_chars * 4 + 64 * 1024,  # DeepL's multipart document upload
    }
    # A DeepL glossary may hold 10 MiB of entries: as JSON with every non-ASCII character escaped (the SDKs' way)
    # that is up to 3 bytes a byte (a two-byte character as \u00fc), and room for its other fields.
    glossary_body_bytes = max(settings.api_max_body_bytes, 3 * MAX_GLOSSARY_BYTES + 64 * 1024)
    body_limits = {**uploads, "/v2/glossaries": glossary_body_bytes, "/v3/glossaries": glossary_body_bytes}
    # Inside the size limit: NUL and lone surrogates in the path, query, headers or a JSON body are a 400.
    app.add_middleware(InputCheck, raw_body_paths=uploads)
    app.add_middleware(BodySizeLimit, max_bytes=settings.api_max_body_bytes, uploads=body_limits)
    app.add_middleware(
        BodyReadTimeout,
        read_timeout=settings.upload_read_timeout_seconds,
        total_timeout=settings.upload_total_timeout_seconds,
    )
    # Outermost: a browser's preflight to a LibreTranslate route is answered before anything reads the request.
    app.add_middleware(LibreTranslateCors, origins=settings.api_cors_origins)
    app.include_router(health.router)
    app.include_router(jobs.router)
    app.include_router(runs.router)
    app.include_router(documents.router)
    app.include_router(events.router)
    app.include_router(files.router)
    app.include_router(batches.router)
    app.include_router(models.router)
    app.include_router(usage_routes.router)
    app.include_router(libretranslate.router)
    app.include_router(deepl.router)
    app.include_router(deepl_v3_glossaries.router)
    app.include_router(history.router)
    app.include_router(console.router)  # the web console at /
    add_door_bodies(app)  # the DeepL and LibreTranslate doors' bodies, which they read themselves, in the schema
    return app
