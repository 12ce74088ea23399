"""The request and response bodies of the native endpoints (jobs, runs, documents) (and so the OpenAPI schema).

Request models check only the shape (types, unknown fields); the content rules (text length,
language codes, metadata bounds, idempotency keys) are the ones :class:`~producer.Client`
applies, run by ``producer.requests`` before anything is written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.door_markup import as_sent
from contract.progress import GroupProgress
from contract.schemas import Job, JobStatus

_FEW_ERRORS = 10
"""Errors of one kind in one object that pydantic names each; past them, one error says it (see JobRequest)."""


class JobRequest(BaseModel):
    """One translation to enqueue."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}]},
    )

    text: str = Field(description="the text to translate (at most DRAGOMAN_MAX_TEXT_CHARS characters)")
    source_lang: str = Field(
        description="BCP-47 / ISO 639 code of the text's language (en, pt-BR, eng...), or auto to have it detected"
    )
    target_lang: str = Field(description="code of the language to translate into")
    metadata: dict[str, Any] | None = Field(default=None, description="any JSON object, kept with the job")
    idempotency_key: str | None = Field(
        default=None, description="submitting again with the same key (within a day) returns the first job's id"
    )
    lane: Literal["interactive", "bulk"] | None = Field(
        default=None,
        description="interactive (the default) reaches the engine before bulk, which keeps a share of "
        "every worker (runs, documents and batches are bulk)",
    )
    priority: Literal["interactive", "bulk"] | None = Field(
        default=None,
        exclude=True,
        description="deprecated: lane's old name, still read as lane; sent with a different lane, the job is refused",
        json_schema_extra={"deprecated": True},
    )
    glossary: dict[str, str] | None = Field(
        default=None,
        description="source term -> target term the translation must use (at most 200 terms of 200 characters); "
        "the job's glossary_misses lists the terms it did not use",
    )
    context: str | None = Field(
        default=None, description="surrounding text the model sees but does not translate (at most 4,000 characters)"
    )
    formality: Literal["formal", "informal", "default"] | None = Field(
        default=None, description="register of the translation, where the model's profile supports it"
    )
    memory: bool = Field(default=True, description="false: neither served from the translation memory nor stored in it")
    model: str | None = Field(
        default=None,
        description="a served model's name or alias (GET /v1/models); none: the deployment's routes choose "
        "(DRAGOMAN_MODEL_ROUTES, else DRAGOMAN_DEFAULT_MODEL); a name nobody serves is 404 model_not_found",
    )

    detection: Literal["strict", "best_guess"] = Field(
        default="strict",
        exclude=True,
        description="with source_lang auto: strict (the default) fails a job whose text the detector cannot tell "
        "with confidence (one or two words, often), naming its best guess; best_guess never fails it: the text's "
        "language when the detector is sure, else the language of the request's other texts, the key's recent "
        "requests or DRAGOMAN_DETECTION_DEFAULT_LANGUAGE, else the detector's best guess (detected_source_lang "
        "says which); the console asks for best_guess, as the DeepL and LibreTranslate doors always do",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_more_fields_than_a_job_has(cls, data: Any) -> Any:
        """One error for an object with more fields than a job has, not one per unknown field.

        Unknown fields are refused (``extra="forbid"``), one error each: an object of 600,000 of them cost
        seconds of errors. One with more fields than :class:`JobRequest` has holds unknown ones anyway.
        """
        if isinstance(data, dict) and len(data) > len(cls.model_fields):
            unknown = ", ".join(repr(name)[:40] for name in islice((k for k in data if k not in cls.model_fields), 3))
            raise ValueError(
                f"{len(data):,} fields, and a job has at most {len(cls.model_fields)}; unknown fields such as {unknown}"
            )
        return data

    @field_validator("glossary", mode="before")
    @classmethod
    def _glossary_of_many_bad_terms_in_one_error(cls, value: Any) -> Any:
        """One error for a glossary with more than a few target terms that are not strings, not one per term.

        A few are each named, as pydantic names them; a glossary of 400,000 numbers cost seconds of errors.
        """
        if isinstance(value, dict) and len(value) > _FEW_ERRORS:
            bad = list(islice((term for term, target in value.items() if not isinstance(target, str)), _FEW_ERRORS + 1))
            if len(bad) > _FEW_ERRORS:
                shown = ", ".join(repr(term)[:40] for term in bad[:3])
                raise ValueError(f"target terms must be strings; those of {shown} and others are not")
        return value

    @model_validator(mode="after")
    def _lane_from_priority(self) -> JobRequest:
        """The one place the API reads ``priority``, ``lane``'s deprecated old name: it becomes ``lane``.

        HTTP clients written before the lane had one word still send it; both, naming different
        lanes, is refused (422), since the client meant one of them.
        """
        if self.priority is not None:
            if self.lane is not None and self.lane != self.priority:
                old_name = f"priority {self.priority!r} (lane's deprecated old name)"
                raise ValueError(f"lane {self.lane!r} and {old_name} differ; send lane alone")
            self.lane, self.priority = self.priority, None
        return self


class JobAccepted(BaseModel):
    """The answer to a submit of one job that is not finished (yet)."""

    id: str
    status: JobStatus


class JobsAccepted(BaseModel):
    """The answer to a submit of a list: the job ids, in the order of the list."""

    ids: list[str]


class JobView(BaseModel):
    """A job: status, result or error, attempts, timings, tokens and model (queued: the model whose lanes it
    waits in; final: the model that answered)."""

    id: str
    status: JobStatus
    source_lang: str | None
    target_lang: str | None
    text: str | None = Field(
        default=None,
        description="the text as it was sent (a DeepL or LibreTranslate request's markup as the client wrote it)",
    )
    translation: str | None = Field(description="the translation (a door request's: with the client's markup)")
    error: str | None
    attempts: int
    model: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    queue_seconds: float | None = Field(description="submit to start")
    run_seconds: float | None = Field(description="start to final status")
    total_seconds: float | None = Field(description="submit to final status")
    finish_reason: str | None = Field(
        default=None,
        description="how the engine ended: stop (finished), length (cut off: the job failed), "
        "repetition (degenerate output, a loop: the job failed), abort",
    )
    pieces: int | None = Field(default=None, description="engine requests it took (more than 1: a long text in pieces)")
    detected_source_lang: str | None = Field(
        default=None, description="the language the worker detected when source_lang was auto"
    )
    glossary_misses: list[str] | None = Field(
        default=None, description="glossary source terms found in the text whose target term the translation lacks"
    )
    from_memory: bool = Field(default=False, description="served from the translation memory, not generated")
    inline_tags: str | None = Field(
        default=None,
        description="a document segment sent with placeholder tags: kept, retried (kept on the one retry) or "
        "fallback (the text between the tags translated on its own)",
    )
    quality_flags: dict[str, str] | None = Field(
        default=None,
        description="what the worker's quality checks found on a succeeded translation, {flag: evidence} "
        "(wrong_language, untranslated, length_ratio, numbers, placeholders, tags, glossary, repetition; "
        "see docs/concepts/quality-flags.md): {} passed every check, null not checked (failed, cancelled, "
        "raw-prompt jobs, checks off, rows from before the checks)",
    )
    waiting_for: str | None = Field(
        default=None,
        description="a queued job whose model no live worker serves: waiting for a worker of model X",
    )
    metadata: dict[str, Any]

    @classmethod
    def of(cls, job: Job) -> JobView:
        """The public view of ``job``: a door job's text and translation with the client's markup
        (:func:`api.door_markup.as_sent`)."""
        job = as_sent(job)
        return cls(
            id=job.id,
            status=job.status,
            source_lang=job.source_lang,
            target_lang=job.target_lang,
            text=job.text,
            translation=job.translation,
            error=job.error,
            attempts=job.attempts,
            model=job.model,
            prompt_tokens=job.prompt_tokens,
            output_tokens=job.output_tokens,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            queue_seconds=job.queue_seconds,
            run_seconds=job.run_seconds,
            total_seconds=job.total_seconds,
            finish_reason=job.finish_reason,
            pieces=job.pieces,
            detected_source_lang=job.detected_source_lang,
            glossary_misses=job.glossary_misses,
            from_memory=job.from_memory,
            inline_tags=job.inline_tags,
            quality_flags=job.quality_flags,
            waiting_for=job.waiting_for,
            metadata=job.metadata,
        )


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``code`` to branch on and a ``message`` for people."""

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error answer."""

    error: ErrorDetail


class Health(BaseModel):
    """The answer of ``/healthz``."""

    status: str


class GroupCounts(BaseModel):
    """A run's or document's jobs by status; ``pending`` are queued or running; ``flagged`` and ``flags``
    summarise the quality checks of the finished ones."""

    total: int
    succeeded: int
    failed: int
    cancelled: int
    pending: int
    percent: float
    flagged: int = Field(
        default=0,
        description="finished jobs whose quality checks found something (a non-empty quality_flags); "
        "list them with GET /v1/runs/{id}/results?flagged=true",
    )
    flags: dict[str, int] = Field(
        default_factory=dict,
        description="flagged jobs per flag (wrong_language, untranslated, length_ratio, numbers, placeholders, "
        "tags, glossary, repetition), only the flags that occur; a job with two flags counts under both",
    )


class GroupView(BaseModel):
    """A run or document: status, counts, rate and the estimated time left.

    ``status``: ``submitting`` (a run being queued) or ``splitting`` (a document being cut into
    jobs; ``held`` once split while its segments wait for room under the API key's limit of
    unfinished jobs), ``running``, ``finishing`` (every job is final; the orchestrator is closing
    it), then ``completed``, ``failed`` or ``cancelled``.
    """

    id: str
    kind: str
    status: str
    name: str | None
    counts: GroupCounts
    jobs_per_second: float | None
    seconds_left: float | None
    created_at: datetime
    completed_at: datetime | None
    error: str | None
    detected_source_lang: str | None = Field(
        default=None,
        description='a document sent with source_lang "auto" (or none): the language detected in its text once it '
        "is split (its segments are translated from it); null before, and for every other run or document",
    )

    @classmethod
    def of(cls, progress: GroupProgress) -> GroupView:
        """The view of a :class:`~contract.progress.GroupProgress`."""
        counts = progress.counts
        return cls(
            id=progress.id,
            kind=progress.kind,
            status=progress.status,
            name=progress.name,
            counts=GroupCounts(
                total=counts.total,
                succeeded=counts.succeeded,
                failed=counts.failed,
                cancelled=counts.cancelled,
                pending=counts.pending,
                percent=round(counts.percent, 2),
                flagged=counts.flagged,
                flags=dict(counts.flags),
            ),
            jobs_per_second=progress.jobs_per_second,
            seconds_left=progress.seconds_left,
            created_at=datetime.fromtimestamp(progress.created_at, UTC),
            completed_at=None if progress.completed_at is None else datetime.fromtimestamp(progress.completed_at, UTC),
            error=progress.error,
            detected_source_lang=progress.detected_source_lang,
        )


class DocumentView(GroupView):
    """A document: its progress and, once assembled, the segments that failed (kept in the source language)."""

    format: str | None = None
    failed_segments: list[dict[str, Any]] | None = None
    report: dict[str, Any] | None = Field(
        default=None,
        description="segments sent with placeholder tags for inline markup (with_tags), those whose translation "
        "kept them (tags_kept), kept them on the one retry (retried), or had each text run between them translated on "
        "its own (fell_back, with a source excerpt); failed: how many segments did not translate; flagged: the "
        "segments whose quality checks found something, each with its flags and their evidence",
    )


class JobPage(BaseModel):
    """A page of the tenant's stand-alone jobs, newest first (``GET /v1/jobs``)."""

    data: list[JobView]
    next: str | None = Field(description="the before= of the next (older) page; null on the last page")


class GroupPage(BaseModel):
    """A page of the tenant's runs, newest first (``GET /v1/runs``)."""

    data: list[GroupView]
    next: str | None = Field(description="the before= of the next (older) page; null on the last page")


class DocumentSummary(GroupView):
    """A document in the tenant's history: its progress, its label (``name``: the filename) and format."""

    format: str


class DocumentPage(BaseModel):
    """A page of the tenant's documents, newest first (``GET /v1/documents``)."""

    data: list[DocumentSummary]
    next: str | None = Field(description="the before= of the next (older) page; null on the last page")
