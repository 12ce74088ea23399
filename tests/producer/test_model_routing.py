"""Every submitted job goes to its model's lanes: the one it names (aliases resolved), else the routes' choice."""

from __future__ import annotations

import pytest
import redis

from broker.keys import RedisKeys
from contract.errors import ConfigurationError, ModelNotFoundError
from contract.models import ModelRoute
from contract.schemas import Lane, TranslationRequest
from contract.settings import Settings
from producer import Client


@pytest.fixture
def routed(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "model_routes": [ModelRoute(source="zh*", model="hy"), ModelRoute(lane=Lane.BULK, model="batch")],
        }
    )


def _lengths(raw_redis: redis.Redis, keys: RedisKeys, *models: str) -> dict[str, int]:
    return {f"{model}/{lane.value}": raw_redis.xlen(keys.lane(lane, model)) for model in models for lane in Lane}


def test_routes_choose_the_model_of_a_job_naming_none(routed: Settings, raw_redis: redis.Redis) -> None:
    with Client(routed) as client:
        chinese = client.submit("你好", "zh", "en")
        client.submit("hello", "en", "fr")
        client.submit("hello", "en", "de", lane="bulk")
        assert client.get(chinese).model == "hy"  # the state record says where it waits
        assert _lengths(raw_redis, client.keys, "default", "hy", "batch") == {
            "default/interactive": 1,
            "default/bulk": 0,
            "hy/interactive": 1,
            "hy/bulk": 0,
            "batch/interactive": 0,
            "batch/bulk": 1,
        }


def test_a_named_model_wins_over_the_routes_and_an_alias_goes_to_its_model(
    routed: Settings, raw_redis: redis.Redis
) -> None:
    keys = RedisKeys.from_settings(routed)
    raw_redis.hset(keys.models, mapping={"small": "small", "tiny": "small"})  # what a worker registers
    with Client(routed) as client:
        job = client.submit("你好", "zh", "en", model="tiny")
        assert client.get(job).model == "small"
        assert raw_redis.xlen(keys.lane(Lane.INTERACTIVE, "small")) == 1
        assert raw_redis.xlen(keys.lane(Lane.INTERACTIVE, "hy")) == 0


def test_an_unknown_model_is_refused_and_nothing_of_the_submission_is_written(
    routed: Settings, raw_redis: redis.Redis
) -> None:
    with Client(routed) as client:
        with pytest.raises(ModelNotFoundError, match=r"model 'gpt-4o' is not served here.*known: batch, default, hy"):
            client.submit("hello", "en", "fr", model="gpt-4o")
        items = [TranslationRequest("a", "en", "fr"), TranslationRequest("b", "en", "fr", model="nope")]
        with pytest.raises(ModelNotFoundError, match="item 1: model 'nope'"):
            client.submit_many(items)
        assert raw_redis.xlen(client.keys.jobs_stream) == 0


def test_a_worker_that_just_registered_is_found_without_waiting_for_the_cache(
    settings: Settings, raw_redis: redis.Redis
) -> None:
    with Client(settings) as client:
        with pytest.raises(ModelNotFoundError):
            client.submit("hello", "en", "fr", model="fresh")
        raw_redis.hset(client.keys.models, "fresh", "fresh")
        resolver = client.core.submitter.models
        resolver._read_at -= 1.0  # the miss re-read waits a second; time passes instead of sleeping
        assert client.get(client.submit("hello", "en", "fr", model="fresh")).model == "fresh"


def test_a_producer_with_another_default_model_than_the_deployment_refuses_to_submit(
    settings: Settings, raw_redis: redis.Redis
) -> None:
    raw_redis.set(RedisKeys.from_settings(settings).default_model_pin, "hunyuan")  # what the first worker pinned
    with Client(settings) as client, pytest.raises(ConfigurationError, match="default model is 'hunyuan'"):
        client.submit("hello", "en", "fr")
    assert raw_redis.xlen(RedisKeys.from_settings(settings).jobs_stream) == 0
