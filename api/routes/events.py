"""``GET /v1/events``: the caller's completion events as Server-Sent Events, resumable with ``Last-Event-ID``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from api.auth import CallerDep
from api.errors import ApiError
from api.event_feed import EventFeed
from api.schemas import ErrorBody
from api.services import ApiServices, services
from producer.groups import group_uuid
from tenancy.batches import BATCH_PREFIX, run_id_of_batch

router = APIRouter(prefix="/v1/events", tags=["events"])
ServicesDep = Annotated[ApiServices, Depends(services)]
_ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorBody} for code in (400, 401, 429, 503)}
MAX_FILTER_IDS = 100


def _groups(run_ids: list[str]) -> frozenset[str]:
    """Run, document or batch ids as the run/document ids events carry (a batch's is its run's)."""
    found = set()
    for value in run_ids:
        found.add(run_id_of_batch(value) if value.startswith(BATCH_PREFIX) else group_uuid(value, "run"))
    return frozenset(found)


@router.get(
    "",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "job.finished events"}, **_ERRORS},
)
async def events(
    caller: CallerDep,
    api: ServicesDep,
    job_id: Annotated[list[str], Query(description="only these jobs (repeatable)")] = [],  # noqa: B006
    run_id: Annotated[
        list[str], Query(description="only the jobs of these runs, documents or batches (repeatable)")
    ] = [],  # noqa: B006
    last_event_id: Annotated[str | None, Header(description="resume after this event's id")] = None,
    after: Annotated[str | None, Query(description="resume after this event id (for clients without headers)")] = None,
) -> StreamingResponse:
    """Each of the caller's jobs that finishes, as ``event: job.finished`` with the event's JSON.

    Every event's ``id:`` is its entry in the tenant's own events stream: reconnect with
    ``Last-Event-ID`` (as browsers' ``EventSource`` does by itself) and the stream goes on after it,
    so nothing finished in between is missed while the tenant's stream still holds it (its last
    ``DRAGOMAN_TENANT_EVENTS_MAXLEN`` events of the last ``DRAGOMAN_TENANT_EVENTS_RETENTION_SECONDS``);
    past that, an ``event: gap`` says events were trimmed. ``0-0`` replays every event the tenant's
    stream keeps, and only the tenant's. Without one, it starts with the jobs that finish from now on.
    After 15 s without an event a ``: keep-alive`` comment goes out (no ``id:``), so proxies keep
    the stream open. The stream ends at the first such line after its key is revoked. One key
    holds at most ``DRAGOMAN_API_MAX_EVENT_STREAMS_PER_KEY`` streams (``429 too_many_streams``
    beyond, with ``Retry-After``).
    """
    resume = last_event_id or after
    if resume is not None and not api.events.valid_cursor(resume):
        raise ApiError(
            400,
            "invalid_event_id",
            f"Last-Event-ID must be an event id like 1700000000000-0 (or, with several Redis shards, one per "
            f"shard, comma-separated, as each event's id: carries them), got {resume!r}",
        )
    if len(job_id) + len(run_id) > MAX_FILTER_IDS:
        raise ApiError(400, "too_many_filters", f"filter on at most {MAX_FILTER_IDS} job and run ids")
    feed = api.events
    jobs = frozenset(job_id)
    groups = _groups(run_id)
    refused = feed.take_stream(caller.key_id)  # counted from here, so concurrent requests cannot all pass
    if refused == "key":
        raise ApiError(
            429,
            "too_many_streams",
            f"this API key holds {feed.max_streams_per_key} open event streams "
            "(DRAGOMAN_API_MAX_EVENT_STREAMS_PER_KEY); close one, or retry shortly",
            {"Retry-After": "5"},
        )
    if refused == "server":
        raise ApiError(
            503,
            "too_many_streams",
            f"this server holds {feed.max_streams} event streams (DRAGOMAN_API_MAX_EVENT_STREAMS); retry shortly",
            {"Retry-After": "5"},
        )
    try:
        start = await feed.start_id(caller.tenant, resume)
    except BaseException:
        feed.give_stream(caller.key_id)
        raise

    async def body() -> AsyncIterator[bytes]:
        yield b"retry: 2000\n\n"
        async for item in feed.follow(caller.tenant, start, job_ids=jobs, group_ids=groups, api_key_id=caller.key_id):
            yield item.encode()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return CountedStream(body(), feed, caller.key_id, media_type="text/event-stream", headers=headers)


class CountedStream(StreamingResponse):
    """A streaming response that gives its slot back when it ends, even if its body never started."""

    def __init__(self, content: AsyncIterator[bytes], feed: EventFeed, api_key_id: str, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._feed = feed
        self._api_key_id = api_key_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._feed.give_stream(self._api_key_id)
