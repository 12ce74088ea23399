"""The ``jobs`` table partitioned by day, so that retention drops whole days and lookups by id stay one probe.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26

``jobs.created_day`` (date, not null) is the partition key: the UTC day of the id's timestamp when the
id is a UUID version 7 (``contract.ids.new_job_id``; ``job_id_for`` gives a v7 group's jobs the
group's timestamp), else the UTC day of ``created_at``. The SQL function ``jobs_created_day(id,
created_at)`` is that rule, used by every statement that inserts a row; ``storage.partitions.job_day``
is its v7 half in Python, so that a lookup by a v7 id names its partition (one index probe).

The primary key becomes ``(id, created_day)`` (a partitioned table's unique keys must hold the
partition key). One partition per day, ``jobs_dYYYYMMDD``, and no DEFAULT partition: creating a
day's partition would then have to scan the default one. The writer creates a missing day's
partition when PostgreSQL finds none for a row, the sweeper and ``dragoman db retention`` create the
coming days' ahead and drop the days past ``DRAGOMAN_RETENTION_DAYS``.

The upgrade creates one partition for every day that holds rows (so that retention drops the old
rows a day at a time, as it will the new ones) and for yesterday to three days ahead, copies every
row, drops the old table and builds the indexes on the new one. It runs in the migration's
transaction and rewrites the whole table (about twice its size on disk until it commits); writes
to ``jobs`` wait for it. Stop the workers of the previous version before it runs: they upsert with
``ON CONFLICT (id)``, which the new key no longer matches.

The downgrade copies the rows back into a plain table keyed by ``id`` (an id stored on two days,
possible only for a non-v7 id written with two different ``created_at``, keeps its newest row).
"""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

AHEAD_DAYS = 3
"""Days after today whose partitions the upgrade creates (``storage.partitions.AHEAD_DAYS``)."""

# An inlinable SQL function: the planner folds it into the statement that calls it. The v7 test reads
# the version nibble and the RFC 9562 variant; the first 48 bits are milliseconds since the epoch.
_DAY_FUNCTION = """
CREATE OR REPLACE FUNCTION jobs_created_day(job_id uuid, created_at timestamptz) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE
    WHEN substr(job_id::text, 15, 1) = '7' AND substr(job_id::text, 20, 1) IN ('8', '9', 'a', 'b')
    THEN date '1970-01-01'
         + (('x' || substr(job_id::text, 1, 8) || substr(job_id::text, 10, 4))::bit(48)::bigint / 86400000)::int
    ELSE (created_at AT TIME ZONE 'UTC')::date
END
$$
"""

_INDEXES = (
    "CREATE INDEX jobs_status_created_at ON jobs (status, created_at)",
    "CREATE INDEX jobs_document_sequence ON jobs (document_id, sequence) WHERE document_id IS NOT NULL",
    "CREATE INDEX jobs_run_lines ON jobs (run_id, sequence) INCLUDE (status) WHERE run_id IS NOT NULL",
    "CREATE INDEX jobs_standalone_tenant_created ON jobs (tenant, created_at, id) "
    "WHERE run_id IS NULL AND document_id IS NULL",
)


def _partition_sql(parent: str, day: datetime.date) -> str:
    following = day + datetime.timedelta(days=1)
    return (
        f"CREATE TABLE jobs_d{day:%Y%m%d} PARTITION OF {parent} "
        f"FOR VALUES FROM ('{day.isoformat()}') TO ('{following.isoformat()}')"
    )


def upgrade() -> None:
    """Create the partitioned table and its partitions, copy the rows, swap the tables, build the indexes."""
    bind = op.get_bind()
    op.execute(_DAY_FUNCTION)
    op.execute(
        "CREATE TABLE jobs_partitioned (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
        "created_day date NOT NULL) PARTITION BY RANGE (created_day)"
    )
    today = bind.execute(sa.text("SELECT (now() AT TIME ZONE 'UTC')::date")).scalar_one()
    days = {today + datetime.timedelta(days=n) for n in range(-1, AHEAD_DAYS + 1)}
    days |= {row[0] for row in bind.execute(sa.text("SELECT DISTINCT jobs_created_day(id, created_at) FROM jobs"))}
    for day in sorted(days):
        op.execute(_partition_sql("jobs_partitioned", day))
    op.execute("INSERT INTO jobs_partitioned SELECT j.*, jobs_created_day(j.id, j.created_at) FROM jobs j")
    op.execute("DROP TABLE jobs")
    op.execute("ALTER TABLE jobs_partitioned RENAME TO jobs")
    op.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id, created_day)")
    for statement in _INDEXES:
        op.execute(statement)
    op.execute("ANALYZE jobs")


def downgrade() -> None:
    """Copy the rows back into a plain table keyed by ``id``; drop the partitions and the day function."""
    op.execute(
        "CREATE TABLE jobs_plain (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS); "
        "ALTER TABLE jobs_plain DROP COLUMN created_day"
    )
    columns = ", ".join(
        row[0]
        for row in op.get_bind().execute(
            sa.text(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs_plain' "
                "AND table_schema = current_schema() ORDER BY ordinal_position"
            )
        )
    )
    op.execute(
        f"INSERT INTO jobs_plain ({columns}) SELECT DISTINCT ON (id) {columns} FROM jobs "
        "ORDER BY id, finished_at DESC NULLS LAST, created_day DESC"
    )
    op.execute("DROP TABLE jobs")
    op.execute("ALTER TABLE jobs_plain RENAME TO jobs")
    op.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id)")
    for statement in _INDEXES:
        op.execute(statement)
    op.execute("DROP FUNCTION jobs_created_day(uuid, timestamptz)")
