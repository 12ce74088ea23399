"""The wire format, as another language's producer would write it with plain XADD."""

from __future__ import annotations

import json
import uuid

import pytest
import redis

from contract.errors import MalformedEntryError
from contract.schemas import JobSpec, JobStatus, build_job_spec
from contract.wire import JobEvent, decode_job_entry, encode_job_entry, read_job_id


def test_hand_written_xadd_is_accepted(raw_redis: redis.Redis) -> None:
    stream = f"wire-{uuid.uuid4().hex}:jobs"
    job_id = str(uuid.uuid4())
    # Exactly what docs/concepts/wire-format.md tells a Go or Node app to send.
    raw_redis.execute_command(
        "XADD",
        stream,
        "*",
        "v",
        "1",
        "id",
        job_id,
        "payload",
        json.dumps({"text": "Bonjour", "source_lang": "fr", "target_lang": "en", "metadata": {"from": "node"}}),
    )
    [(_, fields)] = raw_redis.xrange(stream)
    spec = decode_job_entry(fields, max_chars=10_000)
    assert (spec.job_id, spec.text, spec.source_lang, spec.target_lang) == (job_id, "Bonjour", "fr", "en")
    assert spec.metadata == {"from": "node"}
    assert spec.created_at > 0  # defaulted to "now" when the producer sends none
    raw_redis.delete(stream)


def test_a_run_id_under_its_old_name_batch_id_is_still_read() -> None:
    run_id = str(uuid.uuid4())
    payload = {"text": "Hola", "source_lang": "es", "target_lang": "en", "batch_id": run_id, "sequence": 3}
    spec = decode_job_entry({"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}, max_chars=100)
    assert (spec.run_id, spec.sequence) == (run_id, 3)
    assert json.loads(encode_job_entry(spec)["payload"])["run_id"] == run_id


def test_encode_then_decode_round_trips() -> None:
    spec = JobSpec(
        job_id=str(uuid.uuid4()),
        text="Grüße 👋",
        source_lang="de",
        target_lang="ja",
        created_at=1_700_000_000.25,
        metadata={"k": [1, 2]},
        run_id=str(uuid.uuid4()),
        document_id=str(uuid.uuid4()),
        sequence=3,
    )
    assert decode_job_entry(encode_job_entry(spec), max_chars=100) == spec


def test_source_hints_travel_with_an_auto_job_and_are_checked() -> None:
    spec = build_job_spec(str(uuid.uuid4()), "Save", "auto", "de", max_chars=100, source_hints=["EN", "fr", "en"])
    assert spec.source_hints == ("en", "fr")
    fields = encode_job_entry(spec)
    assert json.loads(fields["payload"])["source_hints"] == ["en", "fr"]
    assert decode_job_entry(fields, max_chars=100) == spec
    # a known source needs no hints: they are not sent
    named = build_job_spec(str(uuid.uuid4()), "Save", "en", "de", max_chars=100, source_hints=["fr"])
    assert named.source_hints == () and "source_hints" not in json.loads(encode_job_entry(named)["payload"])
    payload = {"text": "x", "source_lang": "auto", "target_lang": "fr", "source_hints": "en"}
    with pytest.raises(MalformedEntryError, match="source_hints must be a list"):
        decode_job_entry({"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}, max_chars=10)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"id": str(uuid.uuid4()), "payload": "{}"}, "unsupported schema version None"),
        ({"v": "2", "id": str(uuid.uuid4()), "payload": "{}"}, "unsupported schema version '2'"),
        ({"v": "1", "id": "42", "payload": "{}"}, "'id' must be a UUID"),
        ({"v": "1", "id": str(uuid.uuid4())}, "'payload' is missing"),
        ({"v": "1", "id": str(uuid.uuid4()), "payload": "{not json"}, "not JSON"),
        ({"v": "1", "id": str(uuid.uuid4()), "payload": "[1]"}, "must be a JSON object"),
        ({"v": "1", "id": str(uuid.uuid4()), "payload": '{"text": "x", "source_lang": "en"}'}, "missing 'target_lang'"),
        (
            {"v": "1", "id": str(uuid.uuid4()), "payload": '{"text": "x", "source_lang": "en", "target_lang": "xx"}'},
            "unknown language",
        ),
        (
            {
                "v": "1",
                "id": str(uuid.uuid4()),
                "payload": json.dumps({"text": "x" * 11, "source_lang": "en", "target_lang": "fr"}),
            },
            "over the limit",
        ),
        (
            {
                "v": "1",
                "id": str(uuid.uuid4()),
                "payload": '{"text": "x", "source_lang": "en", "target_lang": "fr", "sequence": "3"}',
            },
            "'sequence' must be an integer",
        ),
    ],
)
def test_malformed_entries_say_why(fields: dict[str, str], reason: str) -> None:
    with pytest.raises(MalformedEntryError, match=reason):
        decode_job_entry(fields, max_chars=10)


def test_read_job_id_survives_garbage() -> None:
    job_id = str(uuid.uuid4())
    assert read_job_id({"id": job_id.upper()}) == job_id
    assert read_job_id({"id": "nope"}) is None
    assert read_job_id({}) is None


def test_event_round_trips() -> None:
    event = JobEvent(
        job_id=str(uuid.uuid4()),
        status=JobStatus.FAILED,
        finished_at=1.5,
        error="boom",
        prompt_tokens=3,
        output_tokens=0,
    )
    assert JobEvent.from_json(event.to_json()) == event
    assert event.to_fields()["status"] == "failed"
    with pytest.raises(MalformedEntryError):
        JobEvent.from_json('{"status": "nope"}')


@pytest.mark.parametrize("error", [None, "boom", 'quote " backslash \\ newline \n tab \t', "Grüße 👋 \x01"])
@pytest.mark.parametrize(("prompt", "output"), [(None, None), (3, 0)])
def test_event_json_is_what_a_json_encoder_would_write(
    error: str | None, prompt: int | None, output: int | None
) -> None:
    event = JobEvent(
        job_id=str(uuid.uuid4()),
        status=JobStatus.SUCCEEDED,
        finished_at=1_763_800_000.123456,
        error=error,
        prompt_tokens=prompt,
        output_tokens=output,
    )
    assert json.loads(event.to_json()) == {
        "job_id": event.job_id,
        "status": "succeeded",
        "finished_at": 1_763_800_000.123456,
        "error": error,
        "prompt_tokens": prompt,
        "output_tokens": output,
    }


def test_an_event_with_a_time_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        JobEvent(job_id=str(uuid.uuid4()), status=JobStatus.FAILED, finished_at=float("nan")).to_json()


def test_payloads_json_would_accept_but_no_database_can_store_are_malformed() -> None:
    fields = {"v": "1", "id": str(uuid.uuid4())}
    lone_surrogate = '{"text": "a \\ud800 b", "source_lang": "en", "target_lang": "fr"}'
    with pytest.raises(MalformedEntryError, match="not JSON"):
        decode_job_entry({**fields, "payload": lone_surrogate}, max_chars=100)
    not_utf8 = b'{"text": "\xff"}'.decode("utf-8", "surrogateescape")  # how the worker reads such bytes
    with pytest.raises(MalformedEntryError, match="not valid UTF-8"):
        decode_job_entry({**fields, "payload": not_utf8}, max_chars=100)
    with pytest.raises(MalformedEntryError, match="not JSON"):
        decode_job_entry({**fields, "payload": '{"text": NaN}'}, max_chars=100)


_ODD_VALUES = [
    "[1]",
    '{"a": 1}',
    "[" * 50 + "]" * 50,
    '{"k": ' * 50 + "1" + "}" * 50,
    "12345678901234567890123456789012345678901234567890",
    "1.5e308",
    "-0.0",
    "true",
    "null",
    '""',
    '"' + "x" * 100_000 + '"',
    '"\\u0000"',
    '"\\ud800"',
]


@pytest.mark.parametrize(
    "field",
    ["text", "source_lang", "target_lang", "metadata", "created_at", "run_id", "batch_id", "document_id", "sequence"],
)
@pytest.mark.parametrize("value", _ODD_VALUES)
def test_any_json_in_any_field_is_read_or_refused_as_malformed(field: str, value: str) -> None:
    payload = f'{{"text": "x", "source_lang": "en", "target_lang": "fr", "{field}": {value}}}'
    try:
        spec = decode_job_entry({"v": "1", "id": str(uuid.uuid4()), "payload": payload}, max_chars=1000)
    except MalformedEntryError as exc:
        assert len(str(exc)) < 500  # the reason quotes the value, cut short
    else:
        assert isinstance(spec.text, str) and isinstance(spec.metadata, dict)


def test_nesting_past_any_stack_is_malformed_not_a_recursion_error() -> None:
    deep = "[" * 200_000 + "]" * 200_000
    for payload in (deep, f'{{"text": "x", "source_lang": "en", "target_lang": "fr", "metadata": {{"k": {deep}}}}}'):
        with pytest.raises(MalformedEntryError, match="nested"):
            decode_job_entry({"v": "1", "id": str(uuid.uuid4()), "payload": payload}, max_chars=10)


def test_the_tenant_travels_and_is_checked() -> None:
    spec = JobSpec(
        job_id=str(uuid.uuid4()), text="Hi", source_lang="en", target_lang="fr", created_at=1.0, tenant="acme"
    )
    fields = encode_job_entry(spec)
    assert json.loads(fields["payload"])["tenant"] == "acme"
    assert decode_job_entry(fields, max_chars=100).tenant == "acme"
    untenanted = encode_job_entry(
        JobSpec(job_id=spec.job_id, text="Hi", source_lang="en", target_lang="fr", created_at=1.0)
    )
    assert "tenant" not in json.loads(untenanted["payload"])
    for bad in ("", "a:b", "x" * 65, 7):
        payload = {**json.loads(fields["payload"]), "tenant": bad}
        with pytest.raises(MalformedEntryError, match="tenant"):
            decode_job_entry({**fields, "payload": json.dumps(payload)}, max_chars=100)


def test_a_raw_prompt_job_round_trips_and_records_no_languages() -> None:
    generation = {"kind": "chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stop": ["x"]}
    spec = JobSpec(
        job_id=str(uuid.uuid4()),
        text='[{"role": "user", "content": "Hi"}]',
        source_lang="und",
        target_lang="und",
        created_at=1_700_000_000.0,
        generation=generation,
    )
    assert decode_job_entry(encode_job_entry(spec), max_chars=100) == spec
    fields = encode_job_entry(spec)
    payload = json.loads(fields["payload"])
    payload["source_lang"] = "en"  # whatever a producer sends, a raw-prompt job has no languages
    decoded = decode_job_entry({**fields, "payload": json.dumps(payload)}, max_chars=100)
    assert decoded.source_lang == "und" and decoded.generation == generation


@pytest.mark.parametrize(
    ("generation", "reason"),
    [
        ({"kind": "image"}, "generation kind must be one of chat, completion"),
        ({"kind": "completion", "prompt": ""}, "prompt must be a non-empty string"),
        ({"kind": "chat", "messages": [{"role": "user", "content": 1}]}, "messages[0].content"),
        ({"kind": "completion", "prompt": "p", "max_tokens": 0}, "max_tokens"),
        ({"kind": "completion", "prompt": "p", "top_p": 1.5}, "top_p"),
        ("chat", "generation must be an object"),
    ],
)
def test_a_bad_raw_prompt_request_is_a_malformed_entry(generation: object, reason: str) -> None:
    payload = {"text": "t", "source_lang": "und", "target_lang": "und", "generation": generation}
    fields = {"v": "1", "id": str(uuid.uuid4()), "payload": json.dumps(payload)}
    with pytest.raises(MalformedEntryError) as raised:
        decode_job_entry(fields, max_chars=100)
    assert reason in str(raised.value)
