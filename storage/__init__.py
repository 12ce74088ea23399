"""PostgreSQL behind one seam: every SQL statement dragoman runs lives in this package.

The writer, the client, the orchestrator and the health checks reach the tables only through
what is defined here; the schema itself is only changed by ``migrations/``.

- ``connection``: URL forms, one asyncio connection (the writer's, the client's reads) and a
  pool of them (the HTTP API's), :class:`DatabaseUnavailableError`.
- ``migrations``: :func:`upgrade_database` / :func:`downgrade_database` (Alembic).
- ``jobs``: the ``jobs`` table: :class:`JobStore` (the client's reads) and :class:`JobRowWriter`
  (the worker's one-statement upsert of a writer batch), behind the :class:`JobRows` protocol;
  :class:`UnstorableRowError` and :func:`storable_failure` for a row PostgreSQL refuses.
- ``api_keys``: the ``api_keys`` table of the HTTP API: :class:`ApiKeyStore` (create, list and
  revoke, for the CLI through the sync bridge; the server's lookup by hash).
- ``files``: Batch API files: the :class:`FileStore` protocol and :class:`PostgresFileStore`
  (chunked rows, streamed in and out; a per-tenant quota reserved before the bytes, expiry, the
  sweep of expired files), the linear JSONL line splitter and its cap.
- ``batches``: the ``batches`` table (:class:`AsyncBatchStore`): a batch is a run with an
  OpenAI facade.
- ``runs``: the ``runs`` and ``documents`` tables: :class:`GroupStore` (creation, progress,
  results, splitting, finishing under a row lock, assembly, webhook bookkeeping; lookups
  optionally scoped to one tenant of the HTTP API).
- ``glossaries``: the ``glossaries`` table (:class:`GlossaryStore`): a tenant's stored term lists, each of one
  or more language pairs (dictionaries), created whole, used by id on the DeepL-compatible door, held to a
  quota per tenant (:class:`GlossaryQuota`).
- ``history``: a tenant's stand-alone jobs, runs and documents newest first, a keyset page at a time
  (:class:`~storage.history.HistoryStore`, the opaque cursor), and what retries read back. Import it directly.
- ``memory``: the ``translation_memory`` table (:class:`MemoryStore`): the worker's recall of
  a whole read and its stores, the age and size limits, ``dragoman memory stats|purge``.
- ``health``: :func:`ping`, a one-off check (``dragoman check``, through the sync bridge), and
  :class:`ReadinessProbe` (one kept connection) for ``/readyz``.
- ``embedded``: the embedded Redis and PostgreSQL servers (:class:`EmbeddedServices`),
  :func:`resolve_urls` / :func:`ensure_services` (configured URLs win). Import it directly.

Importing this package loads neither psycopg nor Alembic; they are imported on first use.
"""

from storage.api_keys import ApiKey, ApiKeyStore, hash_api_key
from storage.batches import AsyncBatchStore, BatchRow, OutputRow, RunTally
from storage.connection import (
    AsyncConnectionPool,
    DatabaseUnavailableError,
    libpq_url,
    sqlalchemy_url,
)
from storage.files import (
    RUN_INPUT_PURPOSE,
    FileGoneError,
    FileInUseError,
    FileQuotaExceededError,
    FileStore,
    FileTooLargeError,
    FileWriter,
    LineCap,
    LineTooLongError,
    PostgresFileStore,
    Quota,
    StoredFile,
    iter_lines,
    numbered_lines,
)
from storage.glossaries import (
    Dictionary,
    DictionaryInfo,
    GlossaryInfo,
    GlossaryQuota,
    GlossaryQuotaExceededError,
    GlossaryStore,
)
from storage.health import PROBE_APPLICATION_NAME, ReadinessProbe, ping
from storage.jobs import (
    FinalRow,
    JobRows,
    JobRowWriter,
    JobStore,
    RowRecord,
    UnstorableRowError,
    storable_failure,
)
from storage.memory import MemoryEntry, MemoryStats, MemoryStore, MemoryStoreError, RecalledTranslation
from storage.migrations import downgrade_database, upgrade_database
from storage.runs import GroupStore

__all__ = [
    "PROBE_APPLICATION_NAME",
    "RUN_INPUT_PURPOSE",
    "ApiKey",
    "ApiKeyStore",
    "AsyncBatchStore",
    "AsyncConnectionPool",
    "BatchRow",
    "DatabaseUnavailableError",
    "Dictionary",
    "DictionaryInfo",
    "FileGoneError",
    "FileInUseError",
    "FileQuotaExceededError",
    "FileStore",
    "FileTooLargeError",
    "FileWriter",
    "FinalRow",
    "GlossaryInfo",
    "GlossaryQuota",
    "GlossaryQuotaExceededError",
    "GlossaryStore",
    "GroupStore",
    "JobRowWriter",
    "JobRows",
    "JobStore",
    "LineCap",
    "LineTooLongError",
    "MemoryEntry",
    "MemoryStats",
    "MemoryStore",
    "MemoryStoreError",
    "OutputRow",
    "PostgresFileStore",
    "Quota",
    "ReadinessProbe",
    "RecalledTranslation",
    "RowRecord",
    "RunTally",
    "StoredFile",
    "UnstorableRowError",
    "downgrade_database",
    "hash_api_key",
    "iter_lines",
    "libpq_url",
    "numbered_lines",
    "ping",
    "sqlalchemy_url",
    "storable_failure",
    "upgrade_database",
]
