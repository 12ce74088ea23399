"""PostgreSQL access shared by the producer and the worker: URLs, migrations, and job lookup."""

from __future__ import annotations

import uuid
from importlib.resources import files
from typing import Any

from contract.schemas import Job, JobStatus

JOB_COLUMNS = (
    "id, status, source_lang, target_lang, source_text, translated_text, error, attempts, model, "
    "prompt_tokens, output_tokens, created_at, started_at, finished_at, metadata, run_id, "
    "document_id, sequence"
)


def libpq_url(url: str) -> str:
    """``url`` in the form psycopg/libpq accepts (drops a SQLAlchemy ``+driver`` suffix)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    return f"postgresql://{rest}" if scheme.split("+", 1)[0] in ("postgresql", "postgres") else url


def sqlalchemy_url(url: str) -> str:
    """``url`` in the form SQLAlchemy needs to use psycopg 3 (``postgresql+psycopg://``)."""
    return "postgresql+psycopg://" + libpq_url(url).partition("://")[2]


def _alembic_config(database_url: str) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    # ConfigParser treats '%' as interpolation; URLs may carry percent-escapes.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return config


def upgrade_database(database_url: str, revision: str = "head") -> None:
    """Apply the Alembic migrations up to ``revision``; the only way dragoman changes the schema."""
    from alembic import command

    command.upgrade(_alembic_config(database_url), revision)


def downgrade_database(database_url: str, revision: str = "base") -> None:
    """Revert the Alembic migrations down to ``revision``."""
    from alembic import command

    command.downgrade(_alembic_config(database_url), revision)


def row_to_job(row: tuple[Any, ...]) -> Job:
    """Build the public :class:`Job` view from a ``SELECT {JOB_COLUMNS}`` row."""
    (
        job_id,
        status,
        source,
        target,
        text,
        translation,
        error,
        attempts,
        model,
        prompt_tokens,
        output_tokens,
        created,
        started,
        finished,
        metadata,
        run_id,
        document_id,
        sequence,
    ) = row
    return Job(
        id=str(job_id),
        status=JobStatus(status),
        source_lang=source,
        target_lang=target,
        text=text,
        translation=translation,
        error=error,
        attempts=attempts,
        model=model,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        created_at=created,
        started_at=started,
        finished_at=finished,
        metadata=metadata or {},
        run_id=_str_or_none(run_id),
        document_id=_str_or_none(document_id),
        sequence=sequence,
    )


def _str_or_none(value: uuid.UUID | str | None) -> str | None:
    return None if value is None else str(value)


class PostgresConnection:
    """One synchronous, autocommit psycopg connection, opened on first use and reopened if closed.

    An application that only submits never touches PostgreSQL; the client's readers (jobs, runs,
    documents) share one of these.
    """

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._conn: Any = None

    def get(self) -> Any:
        """The open connection."""
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._url, autocommit=True)
        return self._conn

    def close(self) -> None:
        """Close the connection if one was opened."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class JobStore:
    """Synchronous reads of finished jobs for the producer's :class:`~producer.Client`."""

    def __init__(self, connection: PostgresConnection) -> None:
        self._connection = connection

    def get(self, job_id: str) -> Job | None:
        """The job's final row, or ``None`` if it has none (yet)."""
        row = self._connection.get().execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %s", (job_id,)).fetchone()
        return None if row is None else row_to_job(row)
