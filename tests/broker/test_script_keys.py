"""The Cluster rule of every Lua script: each key it touches arrives in KEYS, and all of them share one hash tag.

Structural: each wrapper's ``layout`` is built for inputs that use every optional key (a tenant, an
idempotency key, runs and documents, both lanes), and its KEYS and ARGV are checked. A wrapper that
passes a key in ARGV again, or a key without the deployment's tag, fails here; so does a new
wrapper nobody added a case for.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

import pytest
from redis.crc import key_slot

import broker.scripts
from broker.keys import RedisKeys, hash_tag
from broker.scripts import (
    Arg,
    CancelScript,
    CountAfterScript,
    FinishedJob,
    FinishScript,
    OverdueScript,
    RefillScript,
    RequeueScript,
    ReserveScript,
    StartScript,
    SubmitScript,
    UnfinishedStandaloneScript,
)
from contract.schemas import JobSpec, JobStatus, Lane
from contract.settings import Settings
from contract.wire import JobEvent, encode_job_entry

KEYS = RedisKeys.from_settings(Settings(key_prefix="acme"))
Layout = tuple[Sequence[str], Sequence[Arg]]


def _spec(**fields: object) -> JobSpec:
    values: dict[str, object] = {
        "job_id": str(uuid.uuid4()),
        "text": "Hello {acme}:job:1",  # text that looks like a key travels in the payload, not as an ARGV value
        "source_lang": "en",
        "target_lang": "fr",
        "created_at": 1_700_000_000.5,
    }
    return JobSpec(**(values | fields))  # type: ignore[arg-type]


def _finished(group: str | None, tenant: str | None) -> FinishedJob:
    event = JobEvent(job_id=str(uuid.uuid4()), status=JobStatus.SUCCEEDED, finished_at=1.5)
    return FinishedJob(event, group, tenant)


def _finish() -> Layout:
    jobs = [_finished("run-1", "globex"), _finished("doc-1", "acme"), _finished(None, None), _finished("run-1", "acme")]
    return FinishScript(KEYS, 60, 1000).layout(["1-0", "2-0"], jobs, 1_700_000_000.0, ["3-0"])


def _requeue() -> Layout:
    spec = _spec(tenant="globex", lane=Lane.BULK, run_id="run-1")
    return RequeueScript(KEYS, 60).layout("5-0", spec, encode_job_entry(spec), 1.0)


def _reserve() -> Layout:
    """Every operation's keys at once: named jobs with and without an idempotency key, a claim, a release."""
    script = ReserveScript(KEYS, 60, 10)
    jobs = [(str(uuid.uuid4()), "order-1"), (str(uuid.uuid4()), None)]
    admit_keys, admit_args = script.admit_layout("globex", 5, 1.0, jobs=jobs, token="t", counted=3)
    claim_keys, claim_args = script.claim_layout("globex", "t", [jobs[1][0]], 2.0)
    release_keys, release_args = script.release_layout("globex", "t", [job_id for job_id, _ in jobs])
    return [*admit_keys, *claim_keys, *release_keys], [*admit_args, *claim_args, *release_args]


# One case per wrapper: the layout with every optional key in use.
CASES: dict[type, Callable[[], Layout]] = {
    SubmitScript: lambda: SubmitScript(KEYS, 60, 60, fair_share_buffer=64).layout(
        _spec(tenant="globex", lane=Lane.BULK), "order-1", only_new=True, weight=3
    ),
    RefillScript: lambda: RefillScript(KEYS, 2).layout(KEYS.bulk_jobs_stream, 100, ["globex", "acme", "initech"]),
    CancelScript: lambda: CancelScript(KEYS).layout(str(uuid.uuid4()), 1.0),
    StartScript: lambda: StartScript(KEYS, 60).layout("worker-a", 1.0, [_spec(tenant="globex"), _spec()]),
    FinishScript: _finish,
    RequeueScript: _requeue,
    CountAfterScript: lambda: CountAfterScript().layout(KEYS.bulk_jobs_stream, "1-0", 100),
    OverdueScript: lambda: OverdueScript().layout(KEYS.jobs_stream, KEYS.consumer_group, 2.0, 100),
    ReserveScript: lambda: _reserve(),
    UnfinishedStandaloneScript: lambda: UnfinishedStandaloneScript(KEYS).layout("globex", 1_700_000_000.5, 21),
}

# Pub/Sub channels are not keys (Cluster sends a PUBLISH to every node): the scripts that publish
# take their channel in ARGV, and these are the only ARGV values allowed to look like our names.
CHANNELS = {KEYS.events_channel, KEYS.control_channel}


def test_every_script_wrapper_has_a_case() -> None:
    wrappers = {getattr(broker.scripts, name) for name in broker.scripts.__all__ if name.endswith("Script")}
    wrappers.discard(broker.scripts.LuaScript)
    assert wrappers == set(CASES), "add a case for each script wrapper to CASES"


@pytest.mark.parametrize("wrapper", list(CASES), ids=lambda w: w.__name__)
def test_every_key_a_script_touches_is_in_keys_under_one_hash_tag(wrapper: type) -> None:
    script_keys, _ = CASES[wrapper]()
    assert script_keys
    assert {hash_tag(key) for key in script_keys} == {KEYS.tag}, script_keys
    assert len({key_slot(key.encode()) for key in script_keys}) == 1  # one Redis Cluster slot


@pytest.mark.parametrize("wrapper", list(CASES), ids=lambda w: w.__name__)
def test_no_argv_value_is_one_of_our_keys(wrapper: type) -> None:
    _, args = CASES[wrapper]()
    for value in args:
        if not isinstance(value, str) or value in CHANNELS:
            continue
        assert not _looks_like_a_key(value), f"{wrapper.__name__} passes a key (or a part of one) in ARGV: {value!r}"


def _looks_like_a_key(value: str) -> bool:
    """A tagged name (or the start of one) or an untagged one, as :class:`RedisKeys` builds them."""
    return value.startswith((KEYS.tag, f"{KEYS.prefix}:"))


def test_the_rule_fails_on_a_key_passed_in_argv() -> None:
    """The checks above catch what finish.lua used to do: the group's keys and a tenant key prefix in ARGV."""
    looks_like_a_key = [KEYS.group("run-1"), f"{KEYS.tag}:tenant:", f"{KEYS.prefix}:ratelimit:k:1"]
    assert all(_looks_like_a_key(value) for value in looks_like_a_key)
    assert not _looks_like_a_key(encode_job_entry(_spec())["payload"])  # a payload is not mistaken for one
    assert hash_tag(f"{KEYS.prefix}:job:1") is None  # an untagged key would fail the KEYS check
