"""PostgreSQL behind one seam: every SQL statement dragoman runs lives in this package.

The writer, the client, the orchestrator and the health checks reach the tables only through
what is defined here; the schema itself is only changed by ``migrations/``.

- ``connection``: URL forms, the shared sync connection, the writer's async one,
  :class:`DatabaseUnavailableError`.
- ``migrations``: :func:`upgrade_database` / :func:`downgrade_database` (Alembic).
- ``jobs``: the ``jobs`` table: :class:`JobStore` (the client's reads) and :class:`JobRowWriter`
  (the worker's one-statement batch upsert), behind the :class:`JobRows` protocol;
  :class:`UnstorableRowError` and :func:`storable_failure` for a row PostgreSQL refuses.
- ``runs``: the ``runs`` and ``documents`` tables: :class:`GroupStore` (creation, progress,
  results, splitting, finishing under a row lock, assembly, webhook bookkeeping).
- ``health``: :func:`ping` and :func:`ping_async` for ``dragoman check`` and ``/readyz``.

Importing this package loads neither psycopg nor Alembic; they are imported on first use.
"""

from storage.connection import DatabaseUnavailableError, PostgresConnection, libpq_url, sqlalchemy_url
from storage.health import ping, ping_async
from storage.jobs import FinalRow, JobRows, JobRowWriter, JobStore, RowRecord, UnstorableRowError, storable_failure
from storage.migrations import downgrade_database, upgrade_database
from storage.runs import GroupStore

__all__ = [
    "DatabaseUnavailableError",
    "FinalRow",
    "GroupStore",
    "JobRowWriter",
    "JobRows",
    "JobStore",
    "PostgresConnection",
    "RowRecord",
    "UnstorableRowError",
    "downgrade_database",
    "libpq_url",
    "ping",
    "ping_async",
    "sqlalchemy_url",
    "storable_failure",
    "upgrade_database",
]
