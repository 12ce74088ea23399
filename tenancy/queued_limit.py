"""The per-key limit on a tenant's unfinished jobs, as the HTTP API's tenancy uses it.

The admission itself is :mod:`broker.queued_limit`: the orchestrator, which may not import this
package, reserves a document's segments with it when it splits the document.
"""

from __future__ import annotations

from broker.queued_limit import (
    CLAIM_CHUNK,
    LEASE_SECONDS,
    RETRY_AFTER_SECONDS,
    QueuedJobLimit,
    Reservation,
    TooManyQueuedJobsError,
)

__all__ = [
    "CLAIM_CHUNK",
    "LEASE_SECONDS",
    "RETRY_AFTER_SECONDS",
    "QueuedJobLimit",
    "Reservation",
    "TooManyQueuedJobsError",
]
