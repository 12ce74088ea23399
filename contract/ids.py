"""Job, run and document ids: UUIDs in one canonical form, and the ids derived from a group."""

from __future__ import annotations

import uuid


def canonical_uuid(value: object) -> str | None:
    """``value`` as a canonical lower-case UUID string, or ``None`` if it is not a UUID."""
    try:
        return str(uuid.UUID(str(value).strip()))
    except ValueError:
        return None


def job_id_for(group_id: str, sequence: int) -> str:
    """The id of a run's (or document's) job number ``sequence``: the same every time it is computed."""
    return str(uuid.uuid5(uuid.UUID(group_id), str(sequence)))
