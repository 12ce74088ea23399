"""Job, run and document ids: UUIDs in one canonical form, and the ids derived from a group."""

from __future__ import annotations

import re
import uuid

# What every dragoman producer writes; matching it skips the parse on the worker's hot path.
_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def canonical_uuid(value: object) -> str | None:
    """``value`` as a canonical lower-case UUID string, or ``None`` if it is not a UUID.

    Every form :class:`uuid.UUID` reads is accepted (upper case, braces, ``urn:uuid:``, no
    hyphens), with surrounding whitespace ignored, and :class:`uuid.UUID` objects. Anything else
    (a number, a list from a wire entry) is ``None``. Callers turn ``None`` into their own error.
    """
    if isinstance(value, uuid.UUID):
        return str(value)
    if not isinstance(value, str):
        return None
    if _CANONICAL.fullmatch(value):
        return value
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        return None


def job_id_for(group_id: str, sequence: int) -> str:
    """The id of a run's (or document's) job number ``sequence``: the same every time it is computed."""
    return str(uuid.uuid5(uuid.UUID(group_id), str(sequence)))
