"""Usage per tenant: ``usage_daily``, the finished jobs summed by tenant, UTC day, model and status.

Revision ID: 0017
Revises: 0013
Create Date: 2026-11-26

``GET /v1/usage`` and ``dragoman usage`` read a tenant's jobs, characters and tokens over a range of
days. Summing ``jobs`` rows for that is a scan of every row of the range (the characters are the
source texts' lengths, which no index covers), and an index on ``jobs (tenant, ...)`` is what
migration 0012 dropped because every row the worker writes paid for it. The worker's upsert instead
adds each writer batch into this table in the same statement (``storage/jobs.py``'s ``UPSERT_SQL``),
so usage is exact at every commit and reading a month is reading a few hundred rows.

The upgrade sums the jobs already stored into it, in the migration's transaction: that reads the
whole ``jobs`` table once. Stop the workers of the previous version before it runs (rows they commit
afterwards are not counted: they do not know the table).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# The rows CANCEL_UNSUBMITTED_SQL writes (a run's lines cancelled before they were submitted: no
# text, no tenant) never reached a worker; the writer's count leaves them out, and so does this one.
_BACKFILL_SQL = """
INSERT INTO usage_daily (tenant, day, model, status, jobs, characters, prompt_tokens, output_tokens)
SELECT coalesce(tenant, ''), (coalesce(finished_at, created_at) AT TIME ZONE 'UTC')::date,
       coalesce(model, ''), status, count(*), sum(char_length(source_text)),
       sum(coalesce(prompt_tokens, 0)), sum(coalesce(output_tokens, 0))
FROM jobs
WHERE status IN ('succeeded', 'failed', 'cancelled')
  AND NOT (status = 'cancelled' AND started_at IS NULL AND run_id IS NOT NULL
           AND error = 'cancelled before it was submitted')
GROUP BY 1, 2, 3, 4
"""


def upgrade() -> None:
    """Create ``usage_daily`` and sum the stored jobs into it."""
    op.create_table(
        "usage_daily",
        sa.Column("tenant", sa.Text(), nullable=False),  # '' : jobs not submitted through the HTTP API
        sa.Column("day", sa.Date(), nullable=False),  # the UTC day the job finished
        sa.Column("model", sa.Text(), nullable=False),  # '' : the job's row names no model
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("jobs", sa.BigInteger(), nullable=False),
        sa.Column("characters", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "day", "model", "status", name="usage_daily_pkey"),
    )
    op.execute(_BACKFILL_SQL)


def downgrade() -> None:
    """Drop ``usage_daily``."""
    op.drop_table("usage_daily")
