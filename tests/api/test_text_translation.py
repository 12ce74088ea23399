"""``translate_texts``: the DeepL and LibreTranslate doors' wait, and what it leaves behind when it ends early."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest
from fastapi import FastAPI

from api.auth import caller_for_key
from api.services import ApiServices
from api.text_translation import translate_texts
from contract.schemas import JobStatus, TranslationRequest
from producer.requests import Prepared
from tests.api.conftest import KeyMaker
from tests.waiting import until


async def test_a_request_cancelled_mid_wait_cancels_its_jobs(
    app: FastAPI, http: httpx.AsyncClient, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that disconnects cancels the request's task: its jobs (no worker runs) must not stay queued
    once the grace period for a retry to join them is over (0 here)."""
    api: ApiServices = app.state.services
    monkeypatch.setattr(api.joined, "grace_s", 0.0)
    caller = await caller_for_key(api, tenant_key("gone"), "127.0.0.1")
    requests = [TranslationRequest(text=f"text {i}", source_lang="en", target_lang="de") for i in range(3)]
    submitted: list[str] = []
    write = api.client.submitter.write

    async def recording_write(prepared: Sequence[Prepared], *, only_new: bool = False) -> list[str]:
        ids = await write(prepared, only_new=only_new)
        submitted.extend(ids)
        return ids

    monkeypatch.setattr(api.client.submitter, "write", recording_write)
    task = asyncio.create_task(translate_texts(api, caller, requests, wait_s=30))
    while not submitted:
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    async def all_cancelled() -> bool:  # the shared work's own cancellation runs just after the request's
        jobs = [await api.client.get(job_id, tenant=caller.tenant) for job_id in submitted]
        print([job.status for job in jobs], flush=True)
        return [job.status for job in jobs] == [JobStatus.CANCELLED] * 3

    await until(all_cancelled, "the request's three jobs cancelled")


async def test_a_retry_of_a_cancelled_request_joins_its_jobs(
    app: FastAPI, http: httpx.AsyncClient, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client timed out and sent the same request again: the retry waits for the first attempt's jobs."""
    api: ApiServices = app.state.services
    caller = await caller_for_key(api, tenant_key("retrying"), "127.0.0.1")
    requests = [TranslationRequest(text=f"text {i}", source_lang="en", target_lang="de") for i in range(2)]
    submitted: list[str] = []
    write = api.client.submitter.write

    async def recording_write(prepared: Sequence[Prepared], *, only_new: bool = False) -> list[str]:
        ids = await write(prepared, only_new=only_new)
        submitted.extend(ids)
        return ids

    monkeypatch.setattr(api.client.submitter, "write", recording_write)
    first = asyncio.create_task(translate_texts(api, caller, requests, wait_s=30))
    while not submitted:
        await asyncio.sleep(0.01)
    first.cancel()  # the client's own timeout: it disconnects
    await asyncio.gather(first, return_exceptions=True)
    retry = asyncio.create_task(translate_texts(api, caller, requests, wait_s=30))
    await api.client.cancel_many(submitted[:1])  # stands in for a worker finishing the first one
    other = [await api.client.get(submitted[1], tenant=caller.tenant)]
    assert [job.status for job in other] == [JobStatus.QUEUED]  # not cancelled: the retry waits for it
    await api.client.cancel_many(submitted[1:])
    jobs = await retry
    assert [job.id for job in jobs] == submitted  # the same two jobs: nothing submitted again
