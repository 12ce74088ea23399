"""What :class:`~producer.Client` and :class:`~producer.AsyncClient` share besides the submitter.

Validating a submission, reading a job from its state record or row, and deciding what a
cancel's outcome means are plain functions here, so the synchronous and the asyncio client
(and the HTTP API on top of the latter) apply exactly the same rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from broker.scripts import CancelOutcome
from contract.errors import InvalidJobError, JobNotCancellableError, JobNotFoundError
from contract.ids import canonical_uuid
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


def prepare(
    settings: Settings,
    text: object,
    source_lang: str,
    target_lang: str,
    *,
    metadata: object = None,
    idempotency_key: str | None = None,
    tenant: str | None = None,
    priority: str | None = None,
    glossary: object = None,
    context: object = None,
    formality: object = None,
    memory: object = None,
) -> Prepared:
    """Validate one submission (a fresh job id); raise a subclass of :class:`InvalidJobError` if it is bad."""
    spec = build_job_spec(
        str(uuid.uuid4()),
        text,
        source_lang,
        target_lang,
        max_chars=settings.max_text_chars,
        metadata=dict(metadata) if isinstance(metadata, Mapping) else metadata,
        tenant=tenant,
        priority=priority,
        glossary=glossary,
        context=context,
        formality=formality,
        memory=memory,
    )
    return spec, check_idempotency_key(idempotency_key)


def prepare_many(
    settings: Settings, items: Iterable[TranslationRequest | Mapping[str, Any]], *, tenant: str | None = None
) -> list[Prepared]:
    """Validate every item; the first bad one raises, naming its index, before anything is written."""
    prepared: list[Prepared] = []
    for index, item in enumerate(items):
        request = as_request(item, index)
        try:
            prepared.append(
                prepare(
                    settings,
                    request.text,
                    request.source_lang,
                    request.target_lang,
                    metadata=request.metadata,
                    idempotency_key=request.idempotency_key,
                    tenant=tenant,
                    priority=request.priority,
                    glossary=request.glossary,
                    context=request.context,
                    formality=request.formality,
                    memory=request.memory,
                )
            )
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
        "priority",
        "glossary",
        "context",
        "formality",
        "memory",
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
            priority=item.get("priority"),
            glossary=item.get("glossary"),
            context=item.get("context"),
            formality=item.get("formality"),
            memory=item.get("memory", True),
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
