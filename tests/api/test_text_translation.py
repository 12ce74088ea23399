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


async def test_a_request_cancelled_mid_wait_cancels_its_jobs(
    app: FastAPI, http: httpx.AsyncClient, tenant_key: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that disconnects cancels the request's task: its jobs (no worker runs) must not stay queued."""
    api: ApiServices = app.state.services
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

    jobs = [await api.client.get(job_id, tenant=caller.tenant) for job_id in submitted]
    assert [job.status for job in jobs] == [JobStatus.CANCELLED] * 3
