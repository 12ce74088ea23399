"""What the worker hands to the :class:`~worker.writer.ResultWriter` for each stream entry."""

from __future__ import annotations

import msgspec

from contract.schemas import JobSpec, JobStatus, Lane


class JobResult(msgspec.Struct, frozen=True):
    """The final outcome of one job, tied to the stream entry that delivered it (one per job: a Struct, built in C).

    The entry's lane is ``lane_of(spec)``: the reader sets the spec's lane to the one it read it from;
    ``shard`` is the shard whose lane it was read from (where the writer acknowledges it and publishes
    its event), which is not recomputed from the job id: a plain-``XADD`` producer may have put the
    entry on any shard.
    """

    entry_id: str
    spec: JobSpec
    status: JobStatus
    attempts: int
    started_at: float | None
    finished_at: float
    translation: str | None = None
    error: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None  # how the engine ended: stop, length or repetition (failed), abort (cancelled)
    pieces: int | None = None  # engine requests the translation took (a long text is cut into pieces)
    dead_letter: bool = False  # also copy it to the dead-letter stream (a job that keeps failing)
    detected_source_lang: str | None = None  # what language detection found for source_lang "auto"
    glossary_misses: list[str] | None = None  # None: the job had no glossary (or did not succeed)
    from_memory: bool = False  # served from the translation memory
    inline_tags: str | None = None  # a tagged document segment's outcome: kept, retried, fallback
    quality_flags: dict[str, str] | None = None  # what the quality checks found; None: not checked
    shard: int = 0  # the shard the entry was read from (RedisKeys.for_shard)


class DeadLetter(msgspec.Struct, frozen=True):
    """A stream entry that cannot be run (malformed): failed by id if it has one, then dead-lettered."""

    entry_id: str
    fields: dict[str, str]
    reason: str
    job_id: str | None
    finished_at: float
    lane: Lane = Lane.INTERACTIVE  # the stream it was read from (where it is acknowledged)
    shard: int = 0  # the shard of that stream (its dead letter goes to that shard's dead-letter stream)


def storable_text(text: str | None) -> str | None:
    """``text`` as PostgreSQL and Redis can store it: NUL shown as U+FFFD, lone surrogates as '?'.

    Model output and exception messages can contain both; left as they are, they would fail
    the whole writer batch they are written in, again on every redelivery.
    """
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode()
