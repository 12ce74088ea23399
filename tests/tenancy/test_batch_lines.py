"""Batch API input lines (every refusal has its reason) and the output and error lines of jobs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from contract.ids import job_id_for
from contract.schemas import Job, JobStatus
from storage import OutputRow
from tenancy.batch_lines import (
    BadLineError,
    encode_output_line,
    error_line,
    model_not_found_error,
    numbered,
    parse_line,
)
from tenancy.batches import InvalidBatchError, _window_seconds

RUN = "5b1f0c1e-3f9c-4c4e-9f55-0e3c1a7d2b10"


def _line(**changes: Any) -> bytes:
    line: dict[str, Any] = {
        "custom_id": "c-1",
        "method": "POST",
        "url": "/v1/translations",
        "body": {"text": "Hello", "source_lang": "en", "target_lang": "de", "metadata": {"k": 1}},
    }
    return json.dumps(line | changes).encode()


def _chat(**body: Any) -> bytes:
    fields = {"model": "default", "messages": [{"role": "user", "content": "Hi"}], **body}
    return _line(url="/v1/chat/completions", body=fields)


def _completion(**body: Any) -> bytes:
    return _line(url="/v1/completions", body={"model": "default", "prompt": "Once", **body})


def test_chat_and_completion_lines_become_raw_prompt_jobs() -> None:
    line = _chat(max_completion_tokens=5, temperature=0.5, top_p=0.9, seed=7, stop="\n", user="u")
    _, chat = parse_line(line, "/v1/chat/completions", max_chars=100)
    assert chat.generation == {
        "kind": "chat",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 5,
        "temperature": 0.5,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["\n"],
    }
    assert (chat.source_lang, chat.target_lang, chat.metadata) == ("und", "und", {"custom_id": "c-1"})
    assert json.loads(chat.text) == [{"role": "user", "content": "Hi"}]
    _, completion = parse_line(_completion(max_tokens=3), "/v1/completions", max_chars=100)
    assert completion.generation == {"kind": "completion", "prompt": "Once", "max_tokens": 3}
    assert completion.text == "Once"


def test_a_translation_line_becomes_a_job_with_a_derived_id() -> None:
    custom_id, spec = parse_line(_line(), "/v1/translations", max_chars=100)
    assert custom_id == "c-1" and spec.text == "Hello" and spec.metadata == {"k": 1, "custom_id": "c-1"}
    job = numbered(spec, RUN, 7, "acme")
    assert (job.job_id, job.run_id, job.sequence, job.tenant) == (job_id_for(RUN, 7), RUN, 7, "acme")
    assert numbered(spec, RUN, 7, "acme").job_id == job.job_id  # a resubmission writes the same ids


@pytest.mark.parametrize(
    ("raw", "endpoint", "reason"),
    [
        (b"{oops", "/v1/translations", "not JSON (Expecting property name enclosed in double quotes)"),
        (b'{"custom_id": "\xff"}', "/v1/translations", "not JSON (not UTF-8 text)"),
        (b"", "/v1/translations", "not JSON (Expecting value)"),
        (b"[1]", "/v1/translations", "must be a JSON object"),
        (_line(extra=1), "/v1/translations", "unknown field(s) extra"),
        (_line(custom_id=""), "/v1/translations", "custom_id"),
        (_line(method="GET"), "/v1/translations", "method"),
        (_line(url="/v1/completions"), "/v1/translations", "is not the batch's endpoint"),
        (_line(url="/v1/embeddings"), "/v1/embeddings", "endpoint /v1/embeddings not supported yet"),
        (_chat(messages=[]), "/v1/chat/completions", "body: messages must be a non-empty list"),
        (_chat(tools=[]), "/v1/chat/completions", "unsupported body field(s) tools"),
        (_chat(n=2), "/v1/chat/completions", "body.n must be 1"),
        (_chat(stream=True), "/v1/chat/completions", "stream must be false"),
        (_chat(messages=[{"role": "robot", "content": "x"}]), "/v1/chat/completions", "messages[0].role"),
        (_chat(temperature=3), "/v1/chat/completions", "temperature must be between 0 and 2"),
        (_chat(stop=["a", "b", "c", "d", "e"]), "/v1/chat/completions", "stop must be"),
        (_completion(prompt=["a", "b"]), "/v1/completions", "prompt must be a non-empty string"),
        (_completion(prompt="x" * 101), "/v1/completions", "limit"),
        (_line(body=[1]), "/v1/translations", "body must be a JSON object"),
        (_line(body={"text": "x", "source_lang": "en", "target_lang": "de", "n": 1}), "/v1/translations", "body field"),
        (_line(body={"text": "x", "source_lang": "en"}), "/v1/translations", "body.target_lang"),
        (_line(body={"text": "  ", "source_lang": "en", "target_lang": "de"}), "/v1/translations", "empty"),
        (_line(body={"text": "x" * 101, "source_lang": "en", "target_lang": "de"}), "/v1/translations", "limit"),
        (_line(body={"text": "x", "source_lang": "en", "target_lang": "zz-bad"}), "/v1/translations", "zz-bad"),
    ],
)
def test_a_bad_line_is_refused_with_its_reason(raw: bytes, endpoint: str, reason: str) -> None:
    with pytest.raises(BadLineError) as raised:
        parse_line(raw, endpoint, max_chars=100)
    assert reason in str(raised.value)


def test_json_the_standard_library_reads_is_read_even_where_msgspec_refuses_it() -> None:
    raw = json.dumps(
        {
            "custom_id": "c",
            "method": "POST",
            "url": "/v1/translations",
            "body": {"text": "x", "source_lang": "en", "target_lang": "de", "metadata": {"big": 10**400}},
        }
    ).encode()
    _, spec = parse_line(raw, "/v1/translations", max_chars=100)
    assert spec.metadata["big"] == 10**400


def _job(status: JobStatus, **fields: Any) -> Job:
    return Job(
        id=job_id_for(RUN, 0),
        status=status,
        source_lang="en",
        target_lang="de",
        metadata={"custom_id": "c-1", "k": 1},
        finished_at=datetime(2026, 11, 23, tzinfo=UTC),
        **fields,
    )


def _output(endpoint: str = "/v1/translations", **fields: Any) -> dict[str, Any]:
    row = OutputRow(
        job_id=job_id_for(RUN, 0),
        custom_id="c-1",
        metadata_json=fields.pop("metadata_json", '{"k": 1}'),
        source_lang="en",
        target_lang="de",
        translation=fields.pop("translation", "Hallo"),
        model="m",
        prompt_tokens=2,
        output_tokens=3,
        finished_at=1_795_392_000,
        finish_reason=fields.pop("finish_reason", "stop"),
        quality_flags_json=fields.pop("quality_flags_json", None),
    )
    line: dict[str, Any] = json.loads(encode_output_line(row, endpoint))
    return line


def test_output_and_error_lines_in_openai_s_shape() -> None:
    done = _output()
    job_id = job_id_for(RUN, 0)
    assert done == {
        "id": "batch_req_" + job_id.replace("-", ""),
        "custom_id": "c-1",
        "response": {
            "status_code": 200,
            "request_id": job_id,
            "body": {
                "id": job_id,
                "object": "translation",
                "created": 1_795_392_000,
                "model": "m",
                "source_lang": "en",
                "target_lang": "de",
                "translation": "Hallo",
                "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
                "metadata": {"k": 1},
            },
        },
        "error": None,
    }
    assert "metadata" not in _output(metadata_json=None)["response"]["body"]  # none but its custom_id
    failed = error_line(_job(JobStatus.FAILED, error="engine said no"))
    assert failed["response"] is None and failed["error"] == {"code": "request_failed", "message": "engine said no"}
    assert error_line(_job(JobStatus.CANCELLED))["error"]["code"] == "request_cancelled"
    assert error_line(_job(JobStatus.CANCELLED), expired=True)["error"]["code"] == "batch_expired"


@pytest.mark.parametrize(("window", "seconds"), [("24h", 86_400), ("90m", 5_400), ("30s", 30), ("168h", 604_800)])
def test_completion_windows(window: str, seconds: int) -> None:
    assert _window_seconds(window) == seconds


@pytest.mark.parametrize("window", ["", "24", "0h", "169h", "1d", "24 h"])
def test_bad_completion_windows(window: str) -> None:
    with pytest.raises(InvalidBatchError) as raised:
        _window_seconds(window)
    assert raised.value.param == "completion_window"


def test_chat_and_completion_output_bodies() -> None:
    chat = _output("/v1/chat/completions", translation="Hello!", finish_reason=None)["response"]["body"]
    assert chat["object"] == "chat.completion" and chat["model"] == "m"
    assert chat["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop", "logprobs": None}
    ]
    assert chat["usage"]["total_tokens"] == 5
    completion = _output("/v1/completions", translation="Hello!", finish_reason="length")["response"]["body"]
    assert completion["object"] == "text_completion" and completion["choices"][0]["text"] == "Hello!"
    assert completion["choices"][0]["finish_reason"] == "length"


def test_a_line_s_model_is_its_job_s_and_a_line_naming_none_leaves_it_to_the_routes() -> None:
    _, chat = parse_line(_chat(), "/v1/chat/completions", max_chars=100)
    assert chat.model == "default"
    _, translation = parse_line(
        _line(body={"text": "Hi", "source_lang": "en", "target_lang": "de", "model": "small"}),
        "/v1/translations",
        max_chars=100,
    )
    assert translation.model == "small"
    _, unnamed = parse_line(_line(), "/v1/translations", max_chars=100)
    assert unnamed.model is None
    for bad in (3, "", "two words"):
        with pytest.raises(BadLineError, match=r"body\.model"):
            parse_line(_chat(model=bad), "/v1/chat/completions", max_chars=100)


def test_a_line_naming_an_unknown_model_is_answered_model_not_found_in_openai_s_shape() -> None:
    reason = "model 'gpt-4o' is not served here: no routing rule names it and no worker has served it"
    line = error_line(_job(JobStatus.FAILED, error=model_not_found_error(reason)))
    assert line["custom_id"] == "c-1" and line["error"] == {"code": "model_not_found", "message": reason}
    assert line["response"] == {
        "status_code": 404,
        "request_id": job_id_for(RUN, 0),
        "body": {
            "error": {"message": reason, "type": "invalid_request_error", "param": "model", "code": "model_not_found"}
        },
    }
    # Any other failure is still request_failed, even one that mentions the code.
    other = error_line(_job(JobStatus.FAILED, error="engine said model_not_found: no"))
    assert other["error"]["code"] == "request_failed" and other["response"] is None


def test_a_translation_lines_body_carries_its_quality_flags() -> None:
    flags = '{"numbers": "source number 42 missing"}'
    body = _output(quality_flags_json=flags)["response"]["body"]
    assert body["quality_flags"] == {"numbers": "source number 42 missing"}
    assert _output(quality_flags_json="{}")["response"]["body"]["quality_flags"] == {}  # checked, clean
    assert "quality_flags" not in _output()["response"]["body"]  # never checked
    chat = _output("/v1/chat/completions", quality_flags_json=flags)["response"]["body"]
    assert "quality_flags" not in chat  # OpenAI's chat body stays exactly OpenAI's
