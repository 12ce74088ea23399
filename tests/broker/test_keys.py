"""The key layout: one hash tag on every key a script touches, overrides checked when the names are resolved."""

from __future__ import annotations

import pytest

from broker.keys import RedisKeys, hash_tag, shard_tag
from contract.errors import ConfigurationError
from contract.settings import Settings


def test_keys_a_script_touches_carry_the_prefix_s_tag_and_the_others_do_not() -> None:
    keys = RedisKeys.from_settings(Settings(key_prefix="acme", events_channel="acme-live"))
    assert keys.tag == "{acme}"
    assert (keys.jobs_stream, keys.bulk_jobs_stream) == ("{acme}:jobs", "{acme}:jobs:bulk")
    assert (keys.events_stream, keys.completions_stream, keys.dead_letter_stream) == (
        "{acme}:events",
        "{acme}:completions",
        "{acme}:dead",
    )
    assert keys.state("abc") == "{acme}:job:abc"
    assert keys.idempotency("k") == "{acme}:idem:k"
    assert keys.idempotency("k", "t") == "{acme}:tenant:t:idem:k"
    assert keys.tenant_queued("t") == "{acme}:tenant:t:queued"
    assert (keys.group("g"), keys.group_done("g")) == ("{acme}:group:g", "{acme}:group:g:done")
    assert keys.finished_in_second(12) == "{acme}:finished:12"
    # Channels and keys no script touches stay untagged.
    assert keys.events_channel == "acme-live"
    assert keys.control_channel == "acme:control"
    assert keys.worker("w") == "acme:worker:w" and keys.worker_pattern == "acme:worker:*"
    assert keys.rate_window("k", 3) == "acme:ratelimit:k:3"
    assert keys.revoked_api_key("k") == "acme:revoked-key:k"
    assert RedisKeys.from_settings(Settings(key_prefix="acme")).events_channel == "acme:events"


def test_a_stream_override_keeps_its_name_when_it_carries_the_tag() -> None:
    keys = RedisKeys.from_settings(
        Settings(key_prefix="acme", jobs_stream="{acme}:translations", events_stream="{acme}.done")
    )
    assert (keys.jobs_stream, keys.bulk_jobs_stream) == ("{acme}:translations", "{acme}:translations:bulk")
    assert keys.events_stream == "{acme}.done"
    # Redis hashes the first tag wherever it stands in the name.
    assert RedisKeys.from_settings(Settings(key_prefix="acme", jobs_stream="jobs{acme}")).jobs_stream == "jobs{acme}"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("jobs_stream", "translations"),  # no tag: another slot than the state records
        ("jobs_stream", "{other}:jobs"),  # another deployment's tag
        ("events_stream", "acme:events"),
        ("events_stream", "{}{acme}:events"),  # an empty first tag: Redis hashes the whole name
    ],
)
def test_a_stream_override_without_the_tag_is_refused_at_start_up(setting: str, value: str) -> None:
    settings = Settings.model_validate({"key_prefix": "acme", setting: value})
    with pytest.raises(ConfigurationError, match=f"DRAGOMAN_{setting.upper()}.*{{acme}}"):
        RedisKeys.from_settings(settings)


def test_a_prefix_with_braces_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="DRAGOMAN_KEY_PREFIX"):
        RedisKeys.from_settings(Settings(key_prefix="{acme}"))


def test_hash_tags_follow_redis_s_rule() -> None:
    assert hash_tag("{a}:b") == "{a}"
    assert hash_tag("x{a}y{b}") == "{a}"  # the first one
    assert hash_tag("{}a{b}") is None  # empty: the whole key is hashed
    assert hash_tag("a{b") is None
    assert shard_tag("dragoman") == "{dragoman}"
    assert shard_tag("dragoman", 1) == "{dragoman:1}"  # a later shard: its own slot
    with pytest.raises(ValueError):
        shard_tag("dragoman", -1)
