"""``GET /v1/usage``: the caller's own usage (jobs, characters, tokens) by UTC day and/or model."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field, WithJsonSchema

from api.auth import CallerDep
from api.errors import ApiError
from api.schemas import ErrorBody
from api.services import ApiServices, services
from storage.usage import GROUPINGS, UsageRow, UsageStore, range_start

router = APIRouter(prefix="/v1/usage", tags=["usage"])
ServicesDep = Annotated[ApiServices, Depends(services)]
_ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorBody} for code in (400, 401, 429, 503)}
DEFAULT_DAYS = 30
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATE_SCHEMA = WithJsonSchema({"type": "string", "format": "date"})
"""How the schema shows a day parameter: read as text by the route (its own 400 for one that is not a date)."""


class UsageBucket(BaseModel):
    """One group's usage: a day, a model, a day and model, or the whole range (``day``/``model`` null)."""

    day: dt.date | None = Field(None, description="the UTC day the jobs finished (grouped by day)")
    model: str | None = Field(None, description="the served model that answered (grouped by model)")
    jobs: int = Field(description="finished jobs, every status")
    succeeded: int
    failed: int
    cancelled: int
    characters: int = Field(description="source characters of every finished job")
    succeeded_characters: int = Field(description="source characters of the succeeded jobs: what was translated")
    prompt_tokens: int
    output_tokens: int

    @classmethod
    def of(cls, row: UsageRow) -> UsageBucket:
        """The bucket for one row of the usage store."""
        return cls(
            day=row.day,
            model=row.model,
            jobs=row.jobs,
            succeeded=row.succeeded,
            failed=row.failed,
            cancelled=row.cancelled,
            characters=row.characters,
            succeeded_characters=row.succeeded_characters,
            prompt_tokens=row.prompt_tokens,
            output_tokens=row.output_tokens,
        )


class UsageReport(BaseModel):
    """The caller's tenant's usage from ``start`` to ``end`` (UTC days, both included)."""

    object: Literal["usage"] = "usage"
    tenant: str
    start: dt.date
    end: dt.date
    group_by: list[str]
    data: list[UsageBucket] = Field(description="one bucket per group with finished jobs, in day then model order")
    total: UsageBucket = Field(description="the whole range")


async def usage_store(request: Request) -> UsageStore:
    """The application's :class:`UsageStore` (opened by the lifespan on the API's pool)."""
    store: UsageStore = request.app.state.usage
    return store


def _date(value: str | None, name: str) -> dt.date | None:
    if value is None:
        return None
    try:
        if not _DATE.fullmatch(value):
            raise ValueError
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ApiError(400, "invalid_date", f"{name} must be a date as YYYY-MM-DD (UTC), got {value!r}") from None


def _grouping(value: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in value.split(","))
    if not parts or any(part not in GROUPINGS for part in parts) or len(set(parts)) != len(parts):
        raise ApiError(
            400, "invalid_group_by", f"group_by must be day, model or day,model, got {value!r}", param="group_by"
        )
    return tuple(g for g in GROUPINGS if g in parts)  # day before model, whatever order was asked


def _total(rows: list[UsageRow]) -> UsageBucket:
    return UsageBucket(
        jobs=sum(r.jobs for r in rows),
        succeeded=sum(r.succeeded for r in rows),
        failed=sum(r.failed for r in rows),
        cancelled=sum(r.cancelled for r in rows),
        characters=sum(r.characters for r in rows),
        succeeded_characters=sum(r.succeeded_characters for r in rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
    )


@router.get("", response_model=UsageReport, responses=_ERRORS)
async def usage(
    caller: CallerDep,
    api: ServicesDep,
    store: Annotated[UsageStore, Depends(usage_store)],
    start: Annotated[
        str | None,
        _DATE_SCHEMA,
        Query(description="first UTC day, YYYY-MM-DD (default: 29 days before end, or 0001-01-01)"),
    ] = None,
    end: Annotated[
        str | None, _DATE_SCHEMA, Query(description="last UTC day, YYYY-MM-DD, included (default: today)")
    ] = None,
    group_by: Annotated[str, Query(description="day, model, or day,model")] = "day",
) -> UsageReport:
    """The caller's tenant's finished jobs, source characters and tokens per UTC day and/or model.

    Only the caller's own tenant is ever read. ``400 invalid_date`` for a date that is not
    YYYY-MM-DD, ``400 invalid_range`` for an end before the start or a range longer than
    ``DRAGOMAN_USAGE_MAX_DAYS``, ``400 invalid_group_by`` for another grouping.
    """
    last = _date(end, "end") or dt.datetime.now(dt.UTC).date()
    first = _date(start, "start") or range_start(last, DEFAULT_DAYS)
    if last < first:
        raise ApiError(400, "invalid_range", f"end ({last}) is before start ({first})")
    days = (last - first).days + 1
    limit = api.settings.usage_max_days
    if days > limit:
        message = f"{days:,} days from {first} to {last}: ask for at most {limit:,} (DRAGOMAN_USAGE_MAX_DAYS)"
        raise ApiError(400, "invalid_range", message)
    grouping = _grouping(group_by)
    rows = await store.usage(first, last, tenant=caller.tenant, group_by=grouping)
    return UsageReport(
        tenant=caller.tenant,
        start=first,
        end=last,
        group_by=list(grouping),
        data=[UsageBucket.of(row) for row in rows],
        total=_total(rows),
    )
