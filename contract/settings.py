"""The one settings object: every knob dragoman has, read from ``DRAGOMAN_*`` variables.

Build it once at the edge (CLI, application start-up, test fixture) and pass it down; nothing
else in dragoman reads the environment. One precedence rule: a command-line flag that mirrors a
setting (``cli.setting_flags``) > the ``DRAGOMAN_*`` variable > the settings file named by
``DRAGOMAN_SETTINGS_FILE`` (``DRAGOMAN_*=value`` lines) > the default here. The fields come
in groups (:data:`SECTIONS`), which the generated settings reference can follow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, IPvAnyNetwork, field_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from contract.errors import ConfigurationError
from contract.languages import LISTED_LANGUAGES, normalize_language
from contract.model_names import validate_model_name
from contract.models import ModelRoute
from contract.quality import QualityFlag, parse_flags

EchoMode = Literal["mark", "swapcase"]
"""What ``--engine echo`` sends back: the text after ``[echo] ``, or the text with each letter's case swapped."""

ECHO_MODES: tuple[EchoMode, ...] = ("mark", "swapcase")

SETTINGS_FILE_VARIABLE = "DRAGOMAN_SETTINGS_FILE"
"""The variable naming the settings file (read from the environment only: a file cannot name another)."""


class Settings(BaseSettings):
    """Connection URLs, names, limits and worker tuning, each overridable by ``DRAGOMAN_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="DRAGOMAN_", extra="ignore")

    # --- Settings file ---
    settings_file: Path | None = Field(
        default=None,
        description="a file of DRAGOMAN_*=value lines (dotenv syntax) read under the environment: a variable set "
        "in both wins (set it in the environment; the file cannot name another)",
    )

    # --- Services ---
    # Where Redis and PostgreSQL are. Unset: the embedded servers under data_dir.
    redis_url: str | None = Field(
        default=None,
        description="Redis URL (redis://, rediss://, unix://), or a Redis Cluster's seed nodes "
        "(redis+cluster://host:port[,host:port...], rediss+cluster:// for TLS)",
    )
    database_url: str | None = Field(default=None, description="PostgreSQL URL (postgresql://...)")
    data_dir: Path = Field(default=Path(".dragoman"), description="embedded servers' data folder")

    # --- Names ---
    # Redis key names (broker.keys combines them) and the consumer group.
    key_prefix: str = Field(
        default="dragoman", description="prefix of every Redis key (no { or }: it becomes the hash tag {<prefix>})"
    )
    jobs_stream: str | None = Field(
        default=None,
        description="interactive jobs stream (default {<prefix>}:jobs; bulk jobs: the same name + ':bulk'; "
        "must contain the tag {<prefix>})",
    )
    events_stream: str | None = Field(
        default=None, description="events stream (default {<prefix>}:events; must contain the tag {<prefix>})"
    )
    events_channel: str | None = Field(
        default=None, description="Pub/Sub channel (default <prefix>:events; a channel is no key, so any name)"
    )
    consumer_group: str = Field(default="dragoman-workers", description="consumer group on the jobs stream")
    redis_shards: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="stream shards: each lane (of each model) is this many streams, each with its jobs' keys under "
        "the shard's hash tag {<prefix>} (shard 0) or {<prefix>:N}, so that a Redis Cluster spreads them over its "
        "primaries; a job's shard is crc32(job id) mod this (every process of a deployment must agree)",
    )

    # --- Models ---
    # Several models in one deployment (contract/models.py): which model a job naming none goes to, and which
    # names a worker serves.
    default_model: str = Field(
        default="default",
        description="the model a job naming none goes to when no route matches, and the name a worker "
        "without --served-model-name serves (its lanes are the plain {<prefix>}:jobs streams)",
    )
    model_routes: list[ModelRoute] = Field(
        default_factory=list,
        description='rules for jobs naming no model, first match wins: [{"source": "zh*", "model": "hunyuan"}, '
        '{"lane": "interactive", "model": "small"}] (source/target: language-code patterns; lane: one lane)',
    )
    served_model_names: list[str] = Field(
        default_factory=list,
        description="worker: the names it serves, the first the model whose lanes it reads and the others aliases "
        "(default: default_model)",
    )

    # --- Submitting ---
    # Limits enforced at submit time (and again by the worker), and how long Redis keeps a job's traces.
    max_text_chars: int = Field(default=10_000, gt=0, description="longest accepted source text")
    state_ttl_seconds: int = Field(default=7 * 86_400, gt=0, description="TTL of a queued/running state record")
    finished_state_ttl_seconds: int = Field(default=3_600, gt=0, description="TTL of a state record once final")
    idempotency_ttl_seconds: int = Field(default=86_400, gt=0, description="how long an idempotency key is remembered")
    events_maxlen: int = Field(default=100_000, gt=0, description="approximate cap of the events stream")
    # Issue 48: each tenant's events have a stream of their own, which GET /v1/events replays from.
    tenant_events_maxlen: int = Field(
        default=10_000,
        gt=0,
        description="approximate cap of each tenant's own events stream (per shard), which GET /v1/events reads "
        "and replays from: another tenant's events never push a tenant's out, nor add to what it reads",
    )
    tenant_events_retention_seconds: int = Field(
        default=86_400,
        gt=0,
        description="how long a tenant's events are kept in its own events stream (older ones are trimmed; the "
        "stream of a tenant whose jobs stopped finishing goes after this long)",
    )
    submit_chunk_size: int = Field(default=5_000, gt=0, description="jobs per round trip in submit_many")
    submit_wait_replicas: int = Field(
        default=0,
        ge=0,
        description="after queueing jobs, WAIT until this many replicas of their shard's primary hold them, so a "
        "failover cannot lose an accepted job (0: do not wait; Redis replicates asynchronously)",
    )
    submit_wait_timeout_ms: int = Field(
        default=1_000,
        gt=0,
        description="longest WAIT for submit_wait_replicas; fewer replicas in time is an error the submitter sees",
    )

    # --- Worker: engine ---
    # Which engine a worker runs, and vLLM's own arguments.
    engine: Literal["vllm", "echo"] = Field(
        default="vllm",
        description="the worker's engine: vllm (translates with a model), or echo (no model and no translation: "
        "each job's result is its text marked [echo], for trying and testing a deployment)",
    )
    engine_args: str = Field(
        default="",
        description="vLLM's engine arguments as its command line spells them (e.g. --max-num-seqs 256 "
        "--no-enforce-eager); `dragoman worker` flags of the same name come after them and win",
    )
    echo_delay_ms: float = Field(
        default=0.0, ge=0, description="engine echo: milliseconds each request takes, to simulate an engine"
    )
    echo_mode: EchoMode = Field(
        default="mark",
        description="engine echo: mark (each result is its text after '[echo] ') or swapcase (each letter sent "
        "to the model comes back with its case swapped, placeholder tags kept: shows what reaches the model)",
    )
    model_cache_dir: Path = Field(
        default=Path.home() / ".cache" / "dragoman" / "models",
        description="where `dragoman model prepare` builds the default model",
    )

    # --- Worker: reading the lanes ---
    # How many jobs a worker holds and how it reads the interactive and bulk lanes.
    max_in_flight: int | None = Field(
        default=None, gt=0, description="jobs inside the engine (default 2 x the engine's max_num_seqs)"
    )
    read_block_ms: int = Field(default=500, gt=0, description="how long one XREADGROUP blocks")
    bulk_share: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="share of a worker's free slots bulk jobs get while interactive jobs are waiting too "
        "(a lane with nothing waiting leaves its share to the other)",
    )
    lane_policy: Literal["shared", "interactive", "bulk"] = Field(
        default="shared",
        description="how this worker reads the two lanes: shared (both, bulk getting bulk_share while both wait), "
        "interactive (interactive first, bulk only within interactive_bulk_in_flight), or bulk (bulk, and "
        "interactive jobs only once they have waited interactive_spill_seconds)",
    )
    interactive_bulk_in_flight: int = Field(
        default=0,
        ge=0,
        description="lane policy interactive: most bulk jobs in flight on this worker (0: it never reads bulk)",
    )
    interactive_spill_seconds: float = Field(
        default=0.5,
        ge=0,
        description="lane policy bulk: how long an interactive job waits in its lane before this worker takes it",
    )

    # --- Worker: translating ---
    # Output budgets, long texts, language detection.
    max_new_tokens: int | None = Field(
        default=None,
        gt=0,
        description="cap on generated tokens per engine request (default: whatever the model's context leaves)",
    )
    output_tokens_ratio: float = Field(
        default=2.0,
        gt=0,
        description="headroom of the first output budget over the expected translation length "
        "(max_tokens = 16 + ratio x source tokens x the language pair's expansion ratio)",
    )
    length_retry_factor: float = Field(
        default=2.0,
        ge=1,
        description="a generation stopped by its output budget is retried once with this many times the first "
        "budget (capped by the context left); 1 turns the retry off",
    )
    max_piece_chars: int = Field(
        default=4_000,
        ge=20,
        description="longest piece of a job sent to the engine in one request; longer texts are cut at "
        "paragraph, then sentence boundaries and translated as concurrent pieces",
    )
    detection_min_confidence: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="source_lang auto: a probability taken as a detection (a lower one counts only when it is three "
        "times the next language's; otherwise the job fails)",
    )

    # --- Worker: quality checks ---
    # The weight-free checks on every finished translation (contract/quality.py, worker/quality_check.py).
    quality_checks: bool = Field(
        default=True,
        description="check every finished translation job (wrong language, untranslated, length, numbers, "
        "placeholders, tags, glossary, repetition) and store the flags on its row; off: quality_flags stays null",
    )
    quality_check_processes: int = Field(
        default=1,
        ge=0,
        description="child processes that run the quality checks, batched, off the worker's event loop (that core "
        "feeds the engine; the checks cost ~0.3 ms CPU a job); 0: check inline in the worker process "
        "(tiny deployments)",
    )
    retry_on_flags: str = Field(
        default="",
        description="comma-separated quality flags (e.g. wrong_language,untranslated) that get a job translated "
        "once more with sampling; the translation with fewer of these flags is kept, the tokens of both counted",
    )

    # --- Worker: writing results ---
    # Rows are written in writer batches, one transaction each.
    writer_batch_size: int = Field(default=256, gt=0, description="most results written in one transaction")
    writer_flush_ms: float = Field(default=10.0, ge=0, description="longest a finished job waits for its writer batch")
    writer_buffer_size: int = Field(default=4_096, gt=0, description="finished jobs held before reading pauses")

    # --- Translation memory ---
    # Exact repeats served from PostgreSQL without the engine.
    memory_enabled: bool = Field(
        default=True,
        description="serve exact repeats from the translation memory (PostgreSQL) and store new translations there",
    )
    memory_max_age_days: float = Field(default=30.0, gt=0, description="translation memory entries expire after this")
    memory_max_entries: int = Field(
        default=1_000_000, gt=0, description="translation memory size; the least recently used entries go first"
    )
    # Issue 33 (limits): whose translations a job may be served.
    memory_scope: Literal["tenant", "shared"] = Field(
        default="tenant",
        description="tenant: each API tenant has its own translation memory (jobs without a tenant share one); "
        "shared: one memory for everyone, so a tenant may learn what another translated",
    )

    # --- Failures and recovery ---
    # Retries, shutdown, and taking over the jobs of a worker that is gone.
    max_attempts: int = Field(
        default=3, gt=0, description="tries (engine errors) or deliveries (crashes) before a job is failed"
    )
    shutdown_grace_seconds: float = Field(default=30.0, ge=0, description="time in-flight jobs get on SIGTERM")
    consumer_name: str | None = Field(
        default=None,
        description="this worker's consumer name; set a stable one (pod name) to resume its own pending jobs",
    )
    visibility_timeout_seconds: float = Field(
        default=300.0, gt=0, description="idle time after which another worker takes over a pending job"
    )
    reclaim_interval_seconds: float = Field(default=5.0, gt=0, description="how often stale jobs are looked for")
    consumer_gone_seconds: float = Field(
        default=86_400.0, gt=0, description="idle time after which a consumer with nothing pending is removed"
    )

    # --- Documents ---
    # How documents are split into segments.
    max_segment_chars: int = Field(
        default=1_500, ge=20, description="longest document segment; longer prose is cut at sentence ends"
    )
    max_document_chars: int = Field(
        default=2_000_000, gt=0, description="longest accepted document (characters); refused at submit and at split"
    )
    max_document_segments: int = Field(
        default=50_000, gt=0, description="most segments one document may split into (the document fails beyond it)"
    )
    # Issue 33 (hardening): a zipped document (.docx) is unpacked only up to this many bytes.
    max_document_unpacked_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="most bytes a zipped document (.docx) may unpack to, all its members together "
        "(the document fails naming the member past it; the upload limit counts compressed bytes)",
    )
    document_context_chars: int = Field(
        default=300,
        ge=0,
        le=4_000,
        description="characters of the preceding segments sent with each document segment as context "
        "(about a quarter as many tokens; 0: none; dropped for a model whose profile takes no context)",
    )

    # --- Orchestrator and webhooks ---
    # dragoman rq-worker: the sweeper and webhook deliveries.
    orchestration_redis_url: str | None = Field(
        default=None,
        description="the single Redis server (redis://, rediss://, unix://) the orchestration and webhook queues "
        "(RQ) live on; unset: DRAGOMAN_REDIS_URL, which must then be a single server (RQ cannot use a Redis Cluster)",
    )
    sweep_interval_seconds: float = Field(
        default=60.0, gt=0, description="how often the orchestrator looks for runs and documents left unfinished"
    )
    webhook_secret: str | None = Field(default=None, description="HMAC-SHA256 key that signs webhook deliveries")
    webhook_retry_seconds: list[float] = Field(
        default=[5, 30, 120, 600, 1800], description="waits between webhook retries (JSON list; one retry each)"
    )
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, description="total deadline of one webhook delivery (connect, send, answer)"
    )
    webhook_allowed_networks: list[IPvAnyNetwork] = Field(
        default=[],
        description="internal networks webhooks may reach although they are not public (JSON list of CIDRs)",
    )
    webhook_workers: int = Field(
        default=4,
        ge=1,
        description="webhook deliveries one `dragoman rq-worker` makes at once (a process each, its children); "
        "more than DRAGOMAN_WEBHOOK_TENANT_CONCURRENCY, so that receivers that never answer hold only their own "
        "tenants' deliveries",
    )
    webhook_tenant_concurrency: int = Field(
        default=1,
        ge=1,
        description="webhook deliveries of one tenant queued or in flight at once, over every rq-worker; its others "
        "wait their turn, so a slow receiver delays only its own tenant (deliveries without a tenant: no limit)",
    )
    orchestration_tenant_concurrency: int = Field(
        default=1,
        ge=1,
        description="orchestration tasks of one tenant (a document's split or assembly, a run's finish) queued or "
        "running at once, over every rq-worker; its others wait their turn, so another tenant's task waits behind at "
        "most this many of each tenant's (work without a tenant, from the CLI or the Python client: no limit)",
    )
    document_hold_seconds: int = Field(
        default=5,
        ge=1,
        description="how often a document held for room under its API key's limit of unfinished jobs tries again "
        "to queue its segments (they are queued once all of them fit)",
    )
    retention_days: int | None = Field(
        default=None,
        gt=0,
        description="days a finished job's row is kept: the sweeper drops the jobs table's daily partitions older "
        "than this (whole partitions, no DELETE); runs, documents and batches keep theirs (unset: keep every row)",
    )

    # --- Logs, metrics and health ---
    # Log lines, and the worker's /metrics, /healthz and /readyz.
    log_format: Literal["text", "json"] = Field(default="text", description="worker log lines: text or json")
    metrics_enabled: bool = Field(default=True, description="serve /metrics, /healthz and /readyz from the worker")
    metrics_port: int = Field(
        default=9464, ge=0, le=65_535, description="worker's /metrics, /healthz and /readyz port (0: any free port)"
    )
    metrics_host: str = Field(
        default="127.0.0.1", description="address the worker's metrics endpoint listens on (0.0.0.0: every interface)"
    )
    ops_port_file: Path | None = Field(
        default=None,
        description="file the worker writes the /metrics port it bound to (an engine group sets it for each engine)",
    )

    # --- HTTP API ---
    # dragoman api.
    api_host: str = Field(
        default="127.0.0.1", description="address `dragoman api` listens on (0.0.0.0: every interface)"
    )
    api_port: int = Field(
        default=8000, ge=0, le=65_535, description="port `dragoman api` listens on (0: any free port)"
    )
    api_max_body_bytes: int = Field(
        default=10 * 1024 * 1024, gt=0, description="largest request body the HTTP API accepts (413 beyond it)"
    )
    max_file_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="largest file POST /v1/files or POST /v1/runs accepts"
    )
    api_max_jobs_per_request: int = Field(default=1_000, gt=0, description="most jobs one POST /v1/jobs may carry")
    # Issue 49: DeepL limits a /v2/translate request's size, not each text's; one text may be an article.
    api_deepl_max_request_bytes: int = Field(
        default=128 * 1024,
        gt=0,
        description="DeepL door: UTF-8 bytes of one /v2/translate request's texts together (DeepL's 128 KiB); past "
        "it 413 before any work. One text may take all of it, past max_text_chars: the worker takes such a job "
        "and cuts it into pieces",
    )
    api_max_wait_seconds: float = Field(
        default=60.0, ge=0, description="longest ?wait= a submit may ask for (longer ones are cut to this)"
    )
    api_cors_origins: list[str] = Field(
        default=["*"],
        description="origins a browser page may call the LibreTranslate routes from (JSON list; LibreTranslate's "
        'default ["*"]: any; []: none); the other routes answer no cross-origin calls',
    )
    # Issue 49: LibreTranslate's /languages listed what the detector tells apart (Latin, Ancient Greek), not nb.
    api_languages: list[str] = Field(
        default_factory=lambda: list(LISTED_LANGUAGES),
        description="languages LibreTranslate's /languages lists as translated, each into every other (JSON list "
        "of BCP-47 codes; default: LibreTranslate's own list, DeepL's languages included); name those your "
        "models translate. /translate takes any other code too",
    )
    api_download_link_seconds: int = Field(
        default=3600,
        gt=0,
        description="how long the translatedFileUrl LibreTranslate's /translate_file answers can be fetched without "
        "a key (its name is a random token)",
    )
    api_retry_join_seconds: float = Field(
        default=15.0,
        ge=0,
        description="DeepL and LibreTranslate doors: how long a request's jobs outlive its client (gone at its own "
        "timeout) so that the client's identical retry joins them instead of starting again; 0 cancels at once",
    )
    api_rate_limit_per_minute: int = Field(
        default=6_000, gt=0, description="requests per minute one API key may make (429 beyond; per-key override)"
    )
    # Issue 48: a flood of made-up keys costs a PostgreSQL lookup each no longer.
    api_unknown_key_limit_per_minute: int = Field(
        default=60,
        gt=0,
        description="API keys that are not valid (unknown, revoked) one client address may send per minute; "
        "past it 429 too_many_invalid_keys until the minute ends, and no key it sends is looked up (a valid key "
        "the server holds already still passes)",
    )
    api_max_queued_jobs: int = Field(
        default=1_000_000,
        gt=0,
        description="unfinished jobs one API key may have (429 beyond; per-key override)",
    )
    api_batch_create_wait_seconds: float = Field(
        default=10.0, ge=0, description="how long POST /v1/batches waits for validation before answering validating"
    )
    api_max_event_streams: int = Field(
        default=100, gt=0, description="most GET /v1/events streams one API server holds open (503 beyond)"
    )
    # Issue 33 (hardening): one key cannot take every event stream from the other tenants.
    api_max_event_streams_per_key: int = Field(
        default=10, gt=0, description="most GET /v1/events streams one API key holds open on a server (429 beyond)"
    )
    # Issue 33 (burst): the API's connection pools wait for a free connection, then answer 503 busy.
    api_redis_connections: int = Field(
        default=32,
        ge=2,
        description="Redis connections one API server's requests share (a request finding all busy waits; "
        "one is held while any ?wait= is waiting)",
    )
    api_database_connections: int = Field(
        default=8,
        gt=0,
        description="PostgreSQL connections in each of one API server's two request pools (jobs and runs; "
        "keys and batches)",
    )
    api_file_store_connections: int = Field(
        default=8, gt=0, description="PostgreSQL connections one API server's file uploads and downloads share"
    )
    api_pool_wait_seconds: float = Field(
        default=10.0,
        gt=0,
        description="how long a request waits for a free pooled connection before 503 server_busy",
    )
    api_busy_retry_after_seconds: int = Field(
        default=1, gt=0, description="Retry-After (seconds) of a 503 server_busy: a pool stayed busy past its wait"
    )

    # --- Usage per tenant ---
    # GET /v1/usage, dragoman usage, and the worker's per-tenant counters on /metrics.
    usage_max_days: int = Field(
        default=366, gt=0, description="longest range of days one GET /v1/usage may ask for (400 beyond)"
    )
    metrics_max_tenants: int = Field(
        default=50,
        ge=0,
        description="tenants a worker's /metrics names in its per-tenant counters (the rest: tenant=other)",
    )

    # --- HTTP API: uploads and files (issue 33) ---
    # Request bodies are read with deadlines; stored files have a per-tenant quota and an expiry.
    upload_read_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="longest wait for the next piece of a request body (408 beyond it, nothing stored)",
    )
    upload_total_timeout_seconds: float = Field(
        default=1_800.0,
        gt=0,
        description="longest time a whole request body may take to arrive (408 beyond it, nothing stored)",
    )
    upload_memory_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="bytes of a run upload kept in memory while it arrives; the rest is spooled to a temporary file",
    )
    max_jsonl_line_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="longest line of an uploaded JSONL file (a run or a batch input); a longer line is refused "
        "with its number",
    )
    file_quota_bytes: int = Field(
        default=10 * 1024**3,
        gt=0,
        description="bytes of files one tenant may store (uploads, run uploads being queued and batch outputs); "
        "an upload past it is refused (413 file_quota_exceeded), nothing stored",
    )
    # Issue 48: a tenant's stored glossaries (the DeepL door's /v2/glossaries) are held to a quota.
    glossary_quota_count: int = Field(
        default=1_000,
        gt=0,
        description="glossaries one tenant may store (DeepL's own limit per account); past it POST "
        "/v2/glossaries is refused (413 glossary_quota_exceeded), nothing stored",
    )
    glossary_quota_bytes: int = Field(
        default=64 * 1024**2,
        gt=0,
        description="UTF-8 bytes of the terms of all one tenant's glossaries together (one glossary holds at "
        "most 10 MiB of entries, DeepL's limit); a glossary past it is refused (413 glossary_quota_exceeded), "
        "nothing stored",
    )
    file_expiry_seconds: int = Field(
        default=30 * 86_400,
        ge=0,
        description="how long an uploaded batch file is kept when the upload names no expires_after "
        "(OpenAI's default: 30 days; 0: until deleted)",
    )

    # --- HTTP API: connections (issue 48) ---
    # Client connections are a resource: a cap per process, deadlines and a size limit on request heads
    # (api/server_limits.py, api/connection_guard.py). Unset caps are derived from the open-file limit.
    api_max_connections: int | None = Field(
        default=None,
        gt=0,
        description="most client connections one `dragoman api` process holds open; at the cap a new connection "
        "closes the one idle longest (waiting for a request or still sending its head), and is refused with "
        "503 only when every connection has a request in flight. Unset: the open-file limit (`ulimit -n`, "
        "whose soft limit the API raises to the hard one at start) less the pooled Redis and PostgreSQL "
        "connections, 64 spare, the listen queue and the requests in flight, at most 10,000",
    )
    api_max_requests_in_flight: int | None = Field(
        default=None,
        gt=0,
        description="most requests one API process works on at once (event streams and ?wait= included); past "
        "it 503 server_busy with Retry-After, at once. Unset: 1,024, or half of what the open-file limit "
        "leaves after the pools and the listen queue if that is less",
    )
    api_max_header_bytes: int = Field(
        default=16 * 1024,
        ge=1024,
        description="largest request line and headers together: beyond it 431 header_too_large and the "
        "connection closed (an unfinished head is cut off as soon as it passes the limit)",
    )
    api_header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="longest time a request line and headers may take to arrive, from the connection's opening "
        "(or a later request's first byte); beyond it 408 request_timeout and the connection closed (closed "
        "without an answer if nothing was sent)",
    )
    api_keep_alive_seconds: int = Field(
        default=5,
        gt=0,
        description="how long an idle keep-alive connection waits for its next request before it is closed "
        "(behind a load balancer: longer than the balancer's own idle timeout)",
    )

    # --- Source language detection on the doors (issue 49) ---
    # A text sent without a source language to the DeepL and LibreTranslate doors (or the native API with
    # detection "best_guess") is never refused: the worker takes a best guess helped by source hints
    # (contract/language_detection.py; the API's hints: api/source_hints.py).
    detection_default_language: str = Field(
        default="en",
        description="the last source hint of a best guess: the language taken for a text too short to tell "
        "when neither the rest of its request nor the key's recent requests tell either (and its script allows)",
    )
    detection_recent_requests: int = Field(
        default=20,
        ge=0,
        le=1_000,
        description="how many of an API key's recent requests whose language the detector was sure of are kept "
        "(per tenant, in Redis, for 30 days) as source hints for its short texts (0: none kept or used)",
    )

    # --- Fair share between tenants (issue 33) ---
    # A tenant's jobs wait in a staging stream of their own when its lane is busy; workers move them into
    # the lane by deficit round robin (broker/fair_share.py).
    fair_share: bool = Field(
        default=True,
        description="tenants' jobs share each lane by weighted round robin (off: one first-in first-out stream, "
        "as before issue 33; jobs already staged are still moved into the lanes)",
    )
    fair_share_buffer: int = Field(
        default=256,
        gt=0,
        description="a tenant's job goes straight into its lane while the lane holds fewer unread entries than "
        "this and the tenant has nothing staged; else it is staged (workers top the lane up before each read)",
    )
    fair_share_quantum: int = Field(
        default=1,
        gt=0,
        description="entries a tenant of weight 1 moves into the lane per turn (weight N: N times as many)",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Where values come from, the first that has one winning: arguments, the environment, the settings file."""
        path = os.environ.get(SETTINGS_FILE_VARIABLE)
        if not path:
            return init_settings, env_settings
        if not Path(path).is_file():
            raise ConfigurationError(
                f"{SETTINGS_FILE_VARIABLE}={path}: no such file; "
                "point it at a file of DRAGOMAN_*=value lines, or unset it"
            )
        return init_settings, env_settings, DotEnvSettingsSource(settings_cls, env_file=path, env_prefix="DRAGOMAN_")

    @field_validator("key_prefix", "consumer_group")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @property
    def max_job_text_chars(self) -> int:
        """The longest text a job may carry: ``max_text_chars``, or a DeepL door text as long as a whole request
        (``api_deepl_max_request_bytes``: a text of that many bytes has at most that many characters), if longer.

        What the worker takes off the wire (and the DeepL door submits); every other door, runs and documents
        hold texts to ``max_text_chars``. The worker cuts a long text into pieces of ``max_piece_chars``.
        """
        return max(self.max_text_chars, self.api_deepl_max_request_bytes)

    @property
    def retry_flags(self) -> frozenset[QualityFlag]:
        """The flags of ``retry_on_flags``; a :class:`ConfigurationError` naming the variable for an unknown one."""
        return parse_flags(self.retry_on_flags.split(","), setting="DRAGOMAN_RETRY_ON_FLAGS")

    @field_validator("detection_default_language")
    @classmethod
    def _default_language(cls, value: str) -> str:
        return normalize_language(value)

    @field_validator("api_languages")
    @classmethod
    def _listed_languages(cls, value: list[str]) -> list[str]:
        """Each a language code (as written: LibreTranslate's clients know ``tl``, not its canonical ``fil``)."""
        for code in value:
            normalize_language(code)
        return list(dict.fromkeys(code.strip() for code in value))

    @field_validator("default_model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        return validate_model_name(value)

    @field_validator("served_model_names")
    @classmethod
    def _model_names(cls, value: list[str]) -> list[str]:
        return [validate_model_name(name) for name in value]


SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Settings file",
        "Every setting below may also come from a file: a flag > the environment > this file > the default.",
        ("settings_file",),
    ),
    (
        "Services",
        "Where Redis and PostgreSQL are. Unset: the embedded servers under data_dir.",
        (
            "redis_url",
            "database_url",
            "data_dir",
        ),
    ),
    (
        "Names",
        "Redis key names (broker.keys combines them) and the consumer group.",
        (
            "key_prefix",
            "jobs_stream",
            "events_stream",
            "events_channel",
            "consumer_group",
            "redis_shards",
        ),
    ),
    (
        "Models",
        "Several models in one deployment (contract/models.py): which model a job naming none goes to, and which "
        "names a worker serves.",
        (
            "default_model",
            "model_routes",
            "served_model_names",
        ),
    ),
    (
        "Submitting",
        "Limits enforced at submit time (and again by the worker), and how long Redis keeps a job's traces.",
        (
            "max_text_chars",
            "state_ttl_seconds",
            "finished_state_ttl_seconds",
            "idempotency_ttl_seconds",
            "events_maxlen",
            "tenant_events_maxlen",
            "tenant_events_retention_seconds",
            "submit_chunk_size",
            "submit_wait_replicas",
            "submit_wait_timeout_ms",
        ),
    ),
    (
        "Worker: engine",
        "Which engine a worker runs, and vLLM's own arguments.",
        (
            "engine",
            "engine_args",
            "echo_delay_ms",
            "echo_mode",
            "model_cache_dir",
        ),
    ),
    (
        "Worker: reading the lanes",
        "How many jobs a worker holds and how it reads the interactive and bulk lanes.",
        (
            "max_in_flight",
            "read_block_ms",
            "bulk_share",
            "lane_policy",
            "interactive_bulk_in_flight",
            "interactive_spill_seconds",
        ),
    ),
    (
        "Worker: translating",
        "Output budgets, long texts, language detection.",
        (
            "max_new_tokens",
            "output_tokens_ratio",
            "length_retry_factor",
            "max_piece_chars",
            "detection_min_confidence",
        ),
    ),
    (
        "Worker: quality checks",
        "The weight-free checks on every finished translation, and the retry they may ask for.",
        (
            "quality_checks",
            "quality_check_processes",
            "retry_on_flags",
        ),
    ),
    (
        "Worker: writing results",
        "Rows are written in writer batches, one transaction each.",
        (
            "writer_batch_size",
            "writer_flush_ms",
            "writer_buffer_size",
        ),
    ),
    (
        "Translation memory",
        "Exact repeats served from PostgreSQL without the engine.",
        (
            "memory_enabled",
            "memory_max_age_days",
            "memory_max_entries",
            "memory_scope",
        ),
    ),
    (
        "Failures and recovery",
        "Retries, shutdown, and taking over the jobs of a worker that is gone.",
        (
            "max_attempts",
            "shutdown_grace_seconds",
            "consumer_name",
            "visibility_timeout_seconds",
            "reclaim_interval_seconds",
            "consumer_gone_seconds",
        ),
    ),
    (
        "Documents",
        "How documents are split into segments.",
        (
            "max_segment_chars",
            "max_document_chars",
            "max_document_segments",
            "max_document_unpacked_bytes",
            "document_context_chars",
        ),
    ),
    (
        "Orchestrator and webhooks",
        "dragoman rq-worker: the sweeper and webhook deliveries.",
        (
            "orchestration_redis_url",
            "sweep_interval_seconds",
            "webhook_secret",
            "webhook_retry_seconds",
            "webhook_timeout_seconds",
            "webhook_allowed_networks",
            "webhook_workers",
            "webhook_tenant_concurrency",
            "orchestration_tenant_concurrency",
            "document_hold_seconds",
            "retention_days",
        ),
    ),
    (
        "Logs, metrics and health",
        "Log lines, and the worker's /metrics, /healthz and /readyz.",
        (
            "log_format",
            "metrics_enabled",
            "metrics_port",
            "metrics_host",
            "ops_port_file",
        ),
    ),
    (
        "HTTP API",
        "dragoman api.",
        (
            "api_host",
            "api_port",
            "api_max_body_bytes",
            "max_file_bytes",
            "api_max_jobs_per_request",
            "api_deepl_max_request_bytes",
            "api_max_wait_seconds",
            "api_cors_origins",
            "api_languages",
            "api_download_link_seconds",
            "api_retry_join_seconds",
            "api_rate_limit_per_minute",
            "api_unknown_key_limit_per_minute",
            "api_max_queued_jobs",
            "api_batch_create_wait_seconds",
            "api_max_event_streams",
            "api_max_event_streams_per_key",
            "api_redis_connections",
            "api_database_connections",
            "api_file_store_connections",
            "api_pool_wait_seconds",
            "api_busy_retry_after_seconds",
        ),
    ),
    (
        "Usage per tenant",
        "GET /v1/usage, dragoman usage, and the worker's per-tenant counters on /metrics.",
        ("usage_max_days", "metrics_max_tenants"),
    ),
    (
        "HTTP API: uploads and files",
        "Deadlines on request bodies, the JSONL line cap, and each tenant's file and glossary storage.",
        (
            "upload_read_timeout_seconds",
            "upload_total_timeout_seconds",
            "upload_memory_bytes",
            "max_jsonl_line_bytes",
            "file_quota_bytes",
            "glossary_quota_count",
            "glossary_quota_bytes",
            "file_expiry_seconds",
        ),
    ),
    (
        "HTTP API: connections",
        "Client connections and request heads, sized against the open-file limit (`ulimit -n`).",
        (
            "api_max_connections",
            "api_max_requests_in_flight",
            "api_max_header_bytes",
            "api_header_timeout_seconds",
            "api_keep_alive_seconds",
        ),
    ),
    (
        "Source language detection",
        "Texts sent without a source language to the DeepL and LibreTranslate doors and the console: a best guess, "
        "never a refusal (docs/guides/deepl-api.md).",
        ("detection_default_language", "detection_recent_requests"),
    ),
    (
        "Fair share between tenants",
        "How each lane is shared between the HTTP API's tenants (docs/concepts/lanes.md).",
        (
            "fair_share",
            "fair_share_buffer",
            "fair_share_quantum",
        ),
    ),
)
"""The settings in groups, in ``Settings``' order: (title, what they are about, field names), for the settings
reference to lay out its table by; a test holds it to ``Settings.model_fields``."""
