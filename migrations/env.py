"""Alembic environment: runs migrations online against the URL dragoman passes in.

Every worker migrates at start, so several may do it at once: each takes a PostgreSQL advisory
lock inside its migration transaction first. The others wait for it and, once the first has
committed, find nothing left to do (without it, they raced into unique violations).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

config = context.config

# The advisory lock key of dragoman's migrations: "dragoman" in ASCII, as a bigint.
MIGRATION_LOCK_KEY = int.from_bytes(b"dragoman", "big")


def run_migrations_online() -> None:
    """Run every pending migration in one transaction on a short-lived connection, one migrator at a time."""
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("sqlalchemy.url is not set; run migrations with `dragoman db upgrade`")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=None, transaction_per_migration=False)
        with context.begin_transaction():
            # Held until this transaction ends; what is pending is read only after it is taken.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; run `dragoman db upgrade`")
run_migrations_online()
