"""A door job's text and translation as the client sent and got them: its markup kept beside its placeholder tags.

The DeepL door's ``tag_handling`` and LibreTranslate's ``format: html`` queue a text with its markup swapped for
placeholder tags (``Click <x1>here</x1>``, :mod:`markup.placeholders`): the job's text, and the translation the
worker writes, hold those tags. The door answers its client with the markup put back, but the tenant's history
(the console) and ``GET /v1/jobs/{id}`` read the job itself. So the door keeps the markup each placeholder stands
for in the job's metadata, under :data:`MARKUP_KEY` (:func:`markup_metadata`), and the job views put it back
into the text and the translation, and leave the key out of the metadata they show (:func:`as_sent`).

The key rides in the job's metadata, held to its limit (``contract.schemas.MAX_METADATA_BYTES``, 64 KiB): a text
whose markup is larger (a long HTML page) keeps none, and its views show the placeholders. ``MARKUP_KEY`` is
dragoman's own: a client's metadata must not use it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from contract.schemas import MAX_METADATA_BYTES, Job
from markup.placeholders import restore

MARKUP_KEY = "dragoman_markup"
"""The metadata key a door job's markup is kept under: ``{placeholder tag: the markup it stands for}``."""


def markup_metadata(markup: dict[str, str]) -> dict[str, Any] | None:
    """The metadata that keeps ``markup`` with its job; ``None`` for a text without markup, or whose markup is more
    than a job's metadata may hold (its views then show the placeholders)."""
    if not markup:
        return None
    metadata = {MARKUP_KEY: markup}
    return metadata if len(msgspec.json.encode(metadata)) <= MAX_METADATA_BYTES else None


def _markup_of(metadata: dict[str, Any]) -> dict[str, str] | None:
    """The markup kept in ``metadata``, if it is there and of its shape (a client's own value of the key is not)."""
    markup = metadata.get(MARKUP_KEY)
    if not isinstance(markup, dict) or not all(isinstance(v, str) for v in markup.values()):
        return None
    return markup


def as_sent(job: Job) -> Job:
    """``job`` as its client sent it: the text and translation with their markup back, the key out of its metadata.

    A job without kept markup is returned as it is. Linear in the text: a page of them is the work threads' job.
    """
    if MARKUP_KEY not in job.metadata:
        return job
    markup = _markup_of(job.metadata)
    metadata = {key: value for key, value in job.metadata.items() if key != MARKUP_KEY}
    if markup is None:
        return job.model_copy(update={"metadata": metadata})
    return job.model_copy(
        update={
            "text": restore(job.text, markup) if job.text is not None else None,
            "translation": restore(job.translation, markup) if job.translation is not None else None,
            "metadata": metadata,
        }
    )
