"""The rules of :class:`~producer.AsyncClient`'s job operations, as plain functions.

Building and validating a submission, reading a job from its state record or row, and deciding
what a cancel's outcome means live here, beside the client that applies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from broker.scripts import CancelOutcome
from contract.errors import InvalidJobError, JobNotCancellableError, JobNotFoundError
from contract.ids import canonical_uuid, key_shard, new_job_id, new_job_id_on_shard
from contract.schemas import Job, JobSpec, JobStatus, TranslationRequest, build_job_spec
from contract.settings import Settings
from contract.state import state_to_job

Prepared = tuple[JobSpec, str | None]
"""A validated job and its idempotency key: what the submitter writes."""


class InvalidJobIdError(InvalidJobError):
    """The string given as a job id is not a UUID."""


def parse_job_id(job_id: str) -> str:
    """Canonical form of a job id; raises :class:`InvalidJobIdError` if it is not a UUID."""
    canonical = canonical_uuid(job_id)
    if canonical is None:
        raise InvalidJobIdError(f"{job_id!r} is not a job id (job ids are UUIDs)")
    return canonical


def check_idempotency_key(key: str | None) -> str | None:
    """``key`` if it is ``None`` or a non-blank string of at most 256 characters; raise otherwise."""
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip() or len(key) > 256:
        raise InvalidJobError("idempotency_key must be a non-empty string of at most 256 characters")
    return key


class RequestOptions(TypedDict, total=False):
    """What a translation may carry besides its text and languages (the fields of :class:`TranslationRequest`)."""

    metadata: Mapping[str, Any] | None
    idempotency_key: str | None
    lane: str | None
    glossary: Mapping[str, str] | None
    context: str | None
    formality: str | None
    memory: bool
    model: str | None
    source_hints: Sequence[str] | None


def translation_request(
    request: TranslationRequest | str,
    source_lang: str | None,
    target_lang: str | None,
    options: RequestOptions,
) -> TranslationRequest:
    """The one place a submit's keyword form becomes a :class:`TranslationRequest`.

    ``submit(request)`` takes the request as it is (no languages or options beside it);
    ``submit(text, source_lang, target_lang, **options)`` builds one.
    """
    unknown = sorted(set(options) - RequestOptions.__optional_keys__)
    if unknown:  # **options is not checked by Python: a misspelt option would be dropped silently
        renamed = " (priority is now lane)" if "priority" in unknown else ""
        raise InvalidJobError(f"submit got unknown option(s) {', '.join(unknown)}{renamed}")
    if isinstance(request, TranslationRequest):
        if source_lang is not None or target_lang is not None or options:
            raise InvalidJobError("submit a TranslationRequest alone, or a text with its languages and options")
        return request
    if source_lang is None or target_lang is None:
        raise InvalidJobError("submit needs source_lang and target_lang with a text (or a TranslationRequest)")
    metadata, glossary = options.get("metadata"), options.get("glossary")
    return TranslationRequest(
        request,
        source_lang,
        target_lang,
        metadata=dict(metadata) if isinstance(metadata, Mapping) else metadata,
        idempotency_key=options.get("idempotency_key"),
        lane=options.get("lane"),
        glossary=dict(glossary) if isinstance(glossary, Mapping) else glossary,
        context=options.get("context"),
        formality=options.get("formality"),
        memory=options.get("memory", True),
        model=options.get("model"),
        source_hints=_hints(options.get("source_hints")),
    )


def _hints(hints: object) -> Any:
    """``source_hints`` as given, a sequence made a tuple (the request is frozen); checked when the job is built."""
    return tuple(hints) if isinstance(hints, Sequence) and not isinstance(hints, str) else hints


def prepare(
    settings: Settings, request: TranslationRequest, *, tenant: str | None = None, max_chars: int | None = None
) -> Prepared:
    """Validate one request (a fresh job id); raise a subclass of :class:`InvalidJobError` if it is bad.

    ``max_chars``: the longest text taken, ``DRAGOMAN_MAX_TEXT_CHARS`` unless given (the DeepL door's longer texts:
    at most :attr:`~contract.settings.Settings.max_job_text_chars`, what the worker takes).

    The id is a UUIDv7 (``contract.ids``). A request with an idempotency key gets an id on the key's
    Redis shard (:func:`~contract.ids.key_shard`), so a retry (a new id each time) is queued where the
    key was written and finds it.
    """
    idempotency_key = check_idempotency_key(request.idempotency_key)
    shards = settings.redis_shards
    if idempotency_key is None or shards <= 1:
        job_id = new_job_id()
    else:
        job_id = new_job_id_on_shard(key_shard(idempotency_key, tenant, shards), shards)
    spec = build_job_spec(
        job_id,
        request.text,
        request.source_lang,
        request.target_lang,
        max_chars=settings.max_text_chars if max_chars is None else max_chars,
        metadata=dict(request.metadata) if isinstance(request.metadata, Mapping) else request.metadata,
        tenant=tenant,
        lane=request.lane,
        glossary=request.glossary,
        context=request.context,
        formality=request.formality,
        memory=request.memory,
        model=request.model,
        source_hints=request.source_hints,
    )
    return spec, idempotency_key


def prepare_many(
    settings: Settings,
    items: Iterable[TranslationRequest | Mapping[str, Any]],
    *,
    tenant: str | None = None,
    max_chars: int | None = None,
) -> list[Prepared]:
    """Validate every item (texts up to ``max_chars``, as :func:`prepare`); the first bad one raises, naming its
    index, before anything is written."""
    prepared: list[Prepared] = []
    for index, item in enumerate(items):
        request = as_request(item, index)
        try:
            prepared.append(prepare(settings, request, tenant=tenant, max_chars=max_chars))
        except InvalidJobError as exc:
            raise type(exc)(f"item {index}: {exc}") from None
    return prepared


_REQUEST_FIELDS = frozenset(
    {
        "text",
        "source_lang",
        "target_lang",
        "metadata",
        "idempotency_key",
        "lane",
        "glossary",
        "context",
        "formality",
        "memory",
        "model",
        "source_hints",
    }
)


def as_request(item: TranslationRequest | Mapping[str, Any], index: int) -> TranslationRequest:
    """``item`` as a :class:`TranslationRequest` (a dict must have exactly its fields)."""
    if isinstance(item, TranslationRequest):
        return item
    if not isinstance(item, Mapping):
        raise InvalidJobError(f"item {index}: expected a TranslationRequest or a dict, got {type(item).__name__}")
    unknown = set(item) - _REQUEST_FIELDS
    if unknown:
        raise InvalidJobError(f"item {index}: unknown field(s) {sorted(unknown)}")
    try:
        return TranslationRequest(
            text=item["text"],
            source_lang=item["source_lang"],
            target_lang=item["target_lang"],
            metadata=item.get("metadata"),
            idempotency_key=item.get("idempotency_key"),
            lane=item.get("lane"),
            glossary=item.get("glossary"),
            context=item.get("context"),
            formality=item.get("formality"),
            memory=item.get("memory", True),
            model=item.get("model"),
            source_hints=_hints(item.get("source_hints")),
        )
    except KeyError as exc:
        raise InvalidJobError(f"item {index}: missing field {exc.args[0]!r}") from None


def live_job(job_id: str, state: Mapping[str, str]) -> Job | None:
    """The job from its state record if that says queued or running (the row is not needed then)."""
    if state.get("status") in (JobStatus.QUEUED, JobStatus.RUNNING):
        return state_to_job(job_id, state)
    return None


def settled_job(job_id: str, state: Mapping[str, str], row: Job | None) -> Job:
    """The job once its state record is not queued or running: its row, else the record; raise if neither."""
    if row is not None:
        return row
    if state:
        return state_to_job(job_id, state)
    raise JobNotFoundError(f"no job with id {job_id} (it may never have existed, or expired)")


def check_tenant(job: Job, tenant: str | None) -> Job:
    """``job`` if ``tenant`` is ``None`` or owns it; else :class:`JobNotFoundError` (never "forbidden").

    Another tenant's job is answered exactly like an unknown id, so ids reveal nothing.
    """
    if tenant is not None and job.tenant != tenant:
        raise JobNotFoundError(f"no job with id {job.id} (it may never have existed, or expired)")
    return job


def refuse_cancel(job_id: str, outcome: CancelOutcome, row: Job | None) -> None:
    """Raise unless the cancel script's ``outcome`` leaves the job cancelled.

    CANCELLED and CANCEL_REQUESTED are cancels; MISSING looks at the job's final ``row``
    (:class:`JobNotFoundError` without one); a succeeded or failed job raises
    :class:`JobNotCancellableError`. Cancelling a cancelled job is a no-op.
    """
    if outcome in (CancelOutcome.CANCELLED, CancelOutcome.CANCEL_REQUESTED):
        return
    status = outcome.value
    if outcome is CancelOutcome.MISSING:
        if row is None:
            raise JobNotFoundError(f"no job with id {job_id}")
        status = row.status.value
    if status == JobStatus.CANCELLED:
        return
    raise JobNotCancellableError(f"job {job_id} already {status}; only queued or running jobs can be cancelled")
