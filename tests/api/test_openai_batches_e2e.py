"""The OpenAI Batch API end to end on the real vLLM CPU engine and the default model (Gemma 3 270M).

Slow (the engine takes about a minute to start on a CPU): marked ``e2e``. A translation batch
and a completions batch with sampling go through the official SDK, a real server and a worker.
"""

from __future__ import annotations

import json

import pytest

from contract.services import ServiceUrls
from contract.settings import Settings
from tests.api.conftest import KeyMaker
from tests.api.test_openai_batches import (
    call,
    jsonl,
    parse,
    poll,
    sdk,
    translation_line,
)
from tests.worker.conftest import default_model_worker
from worker.vllm_engine import VllmEngine

# The session's loop: the shared real engine (``default_engine``, tests/conftest.py) serves the loop that first used it.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900), pytest.mark.asyncio(loop_scope="session")]


async def test_translation_and_completion_batches_on_the_real_engine(
    default_engine: VllmEngine,
    api_url: str,
    make_key: KeyMaker,
    settings: Settings,
    service_urls: ServiceUrls,
) -> None:
    client = sdk(api_url, make_key("e2e-batch"))
    translations = [translation_line(f"t{n}", text) for n, text in enumerate(["Good morning.", "Thank you."])]
    completion = {
        "custom_id": "c0",
        "method": "POST",
        "url": "/v1/completions",
        "body": {
            "model": "default",
            "prompt": "The capital of France is",
            "max_tokens": 8,
            "temperature": 0.7,
            "top_p": 0.9,
            "seed": 42,
        },
    }
    ids = []
    for endpoint, lines in (("/v1/translations", translations), ("/v1/completions", [completion])):
        uploaded = await call(client.files.create, file=("in.jsonl", jsonl(lines)), purpose="batch")
        batch = await call(client.batches.create, input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")
        assert batch.status == "in_progress", batch.errors
        ids.append(batch.id)
    worker = default_model_worker(settings, service_urls, default_engine, max_in_flight=8)
    await worker.start()
    try:
        done = [await poll(client, batch_id, {"completed", "failed"}) for batch_id in ids]
    finally:
        await worker.stop(grace_seconds=30)
    assert [batch.status for batch in done] == ["completed", "completed"]
    assert done[0].output_file_id and done[1].output_file_id
    translated = parse((await call(client.files.content, done[0].output_file_id)).read())
    assert [line["custom_id"] for line in translated] == ["t0", "t1"]
    assert all(line["response"]["body"]["translation"].strip() for line in translated), translated
    [completed] = parse((await call(client.files.content, done[1].output_file_id)).read())
    body = completed["response"]["body"]
    assert (
        body["object"] == "text_completion" and body["model"] == "default"
    )  # the served name of the model that answered
    assert 0 < body["usage"]["completion_tokens"] <= 8, json.dumps(body)
