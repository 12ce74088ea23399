"""Translate texts and answer with the translations: what the DeepL and LibreTranslate doors (and the console) do.

The native door queues and answers with ids; DeepL's and LibreTranslate's protocols answer one request
with its translations. Both go through the same admission (the key's limit of unfinished jobs) and the
same submitter as ``POST /v1/jobs``, on the interactive lane, and wait for every job of the request.

Limits come before work: a door calls :func:`check_texts` on the texts as they arrived, before it tags,
matches glossaries or builds anything per text, and the jobs are validated on the API's work threads
(:class:`~api.cpu_work.CpuWork`), not on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import msgspec

from api.auth import Caller
from api.errors import ApiError
from api.joined_requests import request_key
from api.services import ApiServices
from contract.errors import InvalidJobError, JobTimeoutError
from contract.schemas import Job, TranslationRequest, validate_text
from contract.settings import Settings
from producer.requests import Prepared, prepare_many


def check_count(settings: Settings, count: int) -> None:
    """Refuse (413 ``too_many_texts``) more texts than ``DRAGOMAN_API_MAX_JOBS_PER_REQUEST`` in one request."""
    limit = settings.api_max_jobs_per_request
    if count > limit:
        raise ApiError(
            413,
            "too_many_texts",
            f"{count:,} texts in one request, over the limit of {limit:,} (DRAGOMAN_API_MAX_JOBS_PER_REQUEST); "
            "send them in several requests",
        )


def check_texts(settings: Settings, texts: Sequence[str]) -> None:
    """Refuse texts over the per-request limits before any per-text work: their count (413, :func:`check_count`),
    then each text's length, markup included (``TextTooLongError`` naming the item, as the job's check would).

    Cheap whatever the request: a count, then one length per text of at most that many.
    """
    check_count(settings, len(texts))
    for index, text in enumerate(texts):
        if len(text) > settings.max_text_chars:
            try:
                validate_text(text, settings.max_text_chars)
            except InvalidJobError as exc:
                raise type(exc)(f"item {index}: {exc}") from None


def check_request_bytes(settings: Settings, texts: Sequence[str]) -> None:
    """Refuse a DeepL request whose texts are more than ``DRAGOMAN_API_DEEPL_MAX_REQUEST_BYTES`` of UTF-8 together
    (413, DeepL's "Request Entity Too Large"), or more of them than one request may carry (413,
    :func:`check_count`); no text is held to ``DRAGOMAN_MAX_TEXT_CHARS`` (DeepL limits the request, not a text).

    Bounded whatever the request: a text is encoded only while it could still fit (its characters are at most
    its bytes), so at most the limit's bytes are ever encoded.
    """
    check_count(settings, len(texts))
    limit = settings.api_deepl_max_request_bytes
    total = 0
    for text in texts:
        total += len(text) if len(text) > limit - total else len(text.encode("utf-8", "surrogatepass"))
        if total > limit:
            raise ApiError(
                413,
                "request_too_large",
                f"Request Entity Too Large: the texts are over {limit:,} bytes together (UTF-8; "
                "DRAGOMAN_API_DEEPL_MAX_REQUEST_BYTES, DeepL's 128 KiB); send them in several requests",
            )


async def submit_admitted(api: ApiServices, caller: Caller, prepared: list[Prepared]) -> list[str]:
    """Queue validated jobs once the tenant's limit admits them (atomically: their ids are reserved); their ids.

    What was reserved and not queued (a failure, an idempotency key that named an earlier job) is given back.
    """
    reservation = await api.queued.admit_jobs(caller.tenant, caller.max_queued_jobs, prepared)
    try:
        ids = await api.client.submitter.write(prepared)
    except Exception:
        with contextlib.suppress(Exception):  # what the release cannot give back ages out
            await reservation.release()
        raise
    unused = [spec.job_id for (spec, _), job_id in zip(prepared, ids, strict=True) if job_id != spec.job_id]
    # Gives back the unused jobs, and the token holding other shards' jobs (queued now, so in their sets);
    # a call with neither does nothing.
    await reservation.release(unused)
    return ids


async def translate_texts(
    api: ApiServices,
    caller: Caller,
    requests: Sequence[TranslationRequest],
    *,
    wait_s: float | None = None,
    inline_tags: Sequence[bool] = (),
    max_chars: int | None = None,
) -> list[Job]:
    """Queue ``requests`` as one tenant's jobs and return them finished, in order (succeeded or failed).

    Every request is validated before anything is queued (one bad item refuses all, naming its index);
    more than ``DRAGOMAN_API_MAX_JOBS_PER_REQUEST`` texts is a 413. Waits at most ``wait_s`` seconds
    (default ``DRAGOMAN_API_MAX_WAIT_SECONDS``); past it the jobs still queued are cancelled and the
    answer is ``504 translation_timeout`` (nothing is left running for an answer nobody will read).
    ``inline_tags`` (one flag per request, or empty for none): the texts whose markup was swapped for
    placeholder tags (:mod:`contract.inline_tags`), which the worker must keep, as in a document's segments.
    ``max_chars``: the longest text taken (default ``DRAGOMAN_MAX_TEXT_CHARS``; the DeepL door's is a request's).

    An identical request (same key, texts and options) already in flight is joined, not started again: a
    client's retry after its own timeout gets the first attempt's translations (:mod:`api.joined_requests`).
    A request whose task is cancelled (its client disconnected) stops waiting; its jobs are cancelled once
    no identical request has waited for them for ``DRAGOMAN_API_RETRY_JOIN_SECONDS``.
    """
    check_count(api.settings, len(requests))
    key = await api.work.run(request_key, caller.key_id, requests, inline_tags, wait_s)
    return await api.joined.run(key, lambda: _translated(api, caller, requests, wait_s, inline_tags, max_chars))


async def _translated(
    api: ApiServices,
    caller: Caller,
    requests: Sequence[TranslationRequest],
    wait_s: float | None,
    inline_tags: Sequence[bool],
    max_chars: int | None,
) -> list[Job]:
    """:func:`translate_texts`' work, once per set of identical requests in flight; cancelled, it cancels its jobs."""
    prepared = await api.work.run(_prepared, api.settings, requests, caller.tenant, inline_tags, max_chars)
    ids = await _submit_or_cancel(api, caller, prepared)
    limit_s = api.settings.api_max_wait_seconds if wait_s is None else wait_s
    try:
        async with asyncio.timeout(limit_s):
            return await api.client.wait_many(ids, timeout=limit_s, tenant=caller.tenant)
    except asyncio.CancelledError:  # the client went away: nobody will read these translations
        await _cancel_shielded(api, ids)
        raise
    except (TimeoutError, JobTimeoutError):
        with contextlib.suppress(Exception):
            await api.client.cancel_many(ids)
        raise ApiError(
            504,
            "translation_timeout",
            f"the {len(ids):,} texts were not all translated within {limit_s:g}s (is a worker running?); "
            "the unfinished ones were cancelled",
        ) from None


def _prepared(
    settings: Settings,
    requests: Sequence[TranslationRequest],
    tenant: str,
    inline_tags: Sequence[bool],
    max_chars: int | None,
) -> list[Prepared]:
    """The requests validated as jobs (the first bad one raises, naming its index), marked ``inline_tags`` as flagged.

    A thousand texts' validation is a thread's work (:class:`~api.cpu_work.CpuWork`), not the event loop's.
    """
    prepared = prepare_many(settings, requests, tenant=tenant, max_chars=max_chars)
    if not inline_tags:
        return prepared
    return [
        (msgspec.structs.replace(spec, inline_tags=True), key) if flag else (spec, key)
        for (spec, key), flag in zip(prepared, inline_tags, strict=True)
    ]


async def _submit_or_cancel(api: ApiServices, caller: Caller, prepared: list[Prepared]) -> list[str]:
    """The submitted jobs' ids; a request cancelled mid-submit lets the submit finish, then cancels what it queued.

    A submit cut short would leave the jobs it had already written queued for an answer nobody reads.
    """
    submitting = asyncio.ensure_future(submit_admitted(api, caller, prepared))
    try:
        return await asyncio.shield(submitting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # a refused submit queued nothing
            await _cancel_shielded(api, await submitting)
        raise


async def _cancel_shielded(api: ApiServices, ids: list[str]) -> None:
    """Cancel ``ids`` from a task being cancelled: shielded, so the cancellation does not cut the cancel short."""
    with contextlib.suppress(Exception):
        await asyncio.shield(api.client.cancel_many(ids))
