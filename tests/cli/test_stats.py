"""``dragoman stats`` and the queue snapshot behind it, against a real Redis."""

from __future__ import annotations

import json
import time

import pytest
import redis

from broker.keys import RedisKeys
from cli.main import EXIT_BAD_INPUT, EXIT_OK, main
from contract.models import ModelRoute
from contract.schemas import TranslationRequest
from contract.settings import Settings
from producer.client import Client


@pytest.fixture(autouse=True)
def _env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.redis_url
    monkeypatch.setenv("DRAGOMAN_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("DRAGOMAN_KEY_PREFIX", settings.key_prefix)
    monkeypatch.delenv("DRAGOMAN_DATABASE_URL", raising=False)  # stats needs Redis only


def _stats_json(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["stats", "--json"]) == EXIT_OK
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_lag_and_pending_after_known_submits_and_reads(
    client: Client, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = client.keys
    client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(25))
    before = _stats_json(capsys)
    assert (before["length"], before["lag"], before["pending"], before["group_exists"]) == (25, 25, 0, False)

    raw_redis.xgroup_create(keys.jobs_stream, keys.consumer_group, id="0")
    raw_redis.xreadgroup(keys.consumer_group, "worker-a", {keys.jobs_stream: ">"}, count=5)
    raw_redis.xreadgroup(keys.consumer_group, "worker-b", {keys.jobs_stream: ">"}, count=2)
    time.sleep(0.05)
    stats = _stats_json(capsys)
    assert (stats["length"], stats["lag"], stats["pending"]) == (25, 18, 7)
    assert {c["name"]: c["pending"] for c in stats["consumers"]} == {"worker-a": 5, "worker-b": 2}  # type: ignore[attr-defined]
    assert isinstance(stats["oldest_pending_age_seconds"], float) and stats["oldest_pending_age_seconds"] > 0

    assert main(["stats"]) == EXIT_OK
    text = capsys.readouterr().out
    assert f"stream {keys.jobs_stream}" in text
    assert "lag 18   pending 7" in text
    assert "worker-a" in text and "(none: no worker heartbeat)" in text


def test_throughput_and_dead_letters(
    settings: Settings, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys.from_settings(settings)
    now = int(time.time())
    raw_redis.set(keys.finished_in_second(now), 30)
    raw_redis.set(keys.finished_in_second(now - 30), 60)
    raw_redis.set(keys.finished_in_second(now - 90), 1_000)  # outside the minute
    raw_redis.xadd(keys.dead_letter_stream, {"reason": "test"})
    stats = _stats_json(capsys)
    assert stats["finished_last_minute"] == 90
    assert stats["jobs_per_second"] == 1.5
    assert stats["dead_letters"] == 1


def test_bad_watch_interval_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--watch", "0"]) == EXIT_BAD_INPUT
    assert "--watch" in capsys.readouterr().err


def test_each_lane_shows_its_own_backlog(
    client: Client, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = client.keys
    client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(3))
    client.submit_many(TranslationRequest(f"bulk {i}", "en", "fr", lane="bulk") for i in range(10))
    raw_redis.xgroup_create(keys.bulk_jobs_stream, keys.consumer_group, id="0")
    raw_redis.xreadgroup(keys.consumer_group, "worker-a", {keys.bulk_jobs_stream: ">"}, count=4)
    stats = _stats_json(capsys)
    lanes = {lane["lane"]: lane for lane in stats["lanes"]}  # type: ignore[attr-defined]
    assert (lanes["interactive"]["length"], lanes["interactive"]["lag"], lanes["interactive"]["pending"]) == (3, 3, 0)
    assert (lanes["bulk"]["length"], lanes["bulk"]["lag"], lanes["bulk"]["pending"]) == (10, 6, 4)
    assert lanes["bulk"]["stream"] == keys.bulk_jobs_stream
    assert (stats["length"], stats["lag"], stats["pending"]) == (13, 9, 4)
    assert {c["name"]: c["pending"] for c in stats["consumers"]} == {"worker-a": 4}  # type: ignore[attr-defined]
    assert 0 <= lanes["bulk"]["oldest_waiting_age_seconds"] < 60  # the 5th bulk job waits since its submit

    assert main(["stats"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "lane   default bulk                 lag 6   pending 4" in text
    assert "lane   default interactive          lag 3   pending 0" in text

    raw_redis.xreadgroup(keys.consumer_group, "worker-a", {keys.bulk_jobs_stream: ">"}, count=6)
    waiting = {lane["lane"]: lane["oldest_waiting_age_seconds"] for lane in _stats_json(capsys)["lanes"]}  # type: ignore[attr-defined]
    assert waiting["bulk"] is None  # every bulk entry read: nothing waits in that lane


def test_each_live_worker_shows_its_lane_policy(
    settings: Settings, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys.from_settings(settings)
    raw_redis.hset(keys.worker("gpu0-e0"), mapping={"in_flight": 512, "written": 9, "lane_policy": "bulk"})
    raw_redis.hset(keys.worker("gpu0-interactive"), mapping={"in_flight": 1, "lane_policy": "interactive"})
    raw_redis.hset(keys.worker("old-version"), mapping={"in_flight": 3})  # a worker that does not say
    workers = {w["name"]: w["lane_policy"] for w in _stats_json(capsys)["workers"]}  # type: ignore[attr-defined]
    assert workers == {"gpu0-e0": "bulk", "gpu0-interactive": "interactive", "old-version": None}
    assert main(["stats"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:4] == ["gpu0-interactive", "-", "interactive", "1"] for line in lines)
    assert any(line.split()[:4] == ["old-version", "-", "-", "3"] for line in lines)


def test_each_served_model_shows_its_lanes_and_live_workers(
    settings: Settings, client: Client, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys.from_settings(settings)
    raw_redis.hset(keys.models, mapping={"hy": "hy", "hy-mt": "hy"})  # a worker of hy registered both names
    raw_redis.hset(keys.worker("w-hy"), mapping={"in_flight": 2, "lane_policy": "shared", "models": "hy hy-mt"})
    client.submit_many(TranslationRequest(f"job {i}", "zh", "en", model="hy-mt") for i in range(4))
    client.submit_many(TranslationRequest(f"job {i}", "en", "fr") for i in range(2))
    stats = _stats_json(capsys)
    assert stats["models"] == ["default", "hy"]
    lengths = {(lane["model"], lane["lane"]): lane["length"] for lane in stats["lanes"]}  # type: ignore[index]
    assert lengths == {
        ("default", "interactive"): 2,
        ("default", "bulk"): 0,
        ("hy", "interactive"): 4,
        ("hy", "bulk"): 0,
    }
    assert main(["stats"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "model  hy                           lag 4   pending 0   1 live worker   (also named hy-mt)" in text
    assert "model  default                      lag 2   pending 0   no live worker" in text
    assert "{" + settings.key_prefix + "}:model:hy:jobs" in text


def test_each_live_worker_shows_its_engine_plan_and_where_each_value_came_from(
    settings: Settings, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = RedisKeys.from_settings(settings)
    plan = "graphs(default) seqs=256(default) mem=0.2691(engine group) in_flight=512(default)"
    raw_redis.hset(keys.worker("gpu0-e0"), mapping={"in_flight": 512, "lane_policy": "bulk", "engine": plan})
    raw_redis.hset(keys.worker("echo"), mapping={"in_flight": 3, "engine": ""})  # the echo engine has no plan
    workers = {w["name"]: w["engine"] for w in _stats_json(capsys)["workers"]}  # type: ignore[attr-defined]
    assert workers == {"gpu0-e0": plan, "echo": None}
    assert main(["stats"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:3] == ["gpu0-e0", "-", "bulk"] and line.endswith(plan) for line in lines)
    assert any("engine (source)" in line for line in lines)


def test_stats_show_a_model_only_a_route_names_before_any_worker_of_it_ran(
    settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAGOMAN_MODEL_ROUTES", '[{"source": "zh*", "model": "hy"}]')
    routed = settings.model_copy(update={"model_routes": [ModelRoute(source="zh*", model="hy")]})
    with Client(routed) as client:
        client.submit_many(TranslationRequest(f"job {i}", "zh", "en") for i in range(3))
    assert _stats_json(capsys)["models"] == ["default", "hy"]  # its backlog shows, though nobody registered hy
    assert main(["stats"]) == EXIT_OK
    assert "model  hy                           lag 3" in capsys.readouterr().out


def test_served_models_lists_and_forgets_names(
    settings: Settings, raw_redis: redis.Redis, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings.database_url
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", settings.database_url)
    keys = RedisKeys.from_settings(settings)
    raw_redis.hset(keys.models, mapping={"hy": "hy", "hy-mt": "hy"})
    raw_redis.set(keys.default_model_pin, "default")
    assert main(["served-models", "list"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "default model: default" in out and "hy-mt" in out and "alias of hy" in out
    assert main(["served-models", "forget", "hy-mt", "nope"]) == EXIT_OK
    assert "forgot 1 of 2 names" in capsys.readouterr().out
    assert raw_redis.hgetall(keys.models) == {"hy": "hy"}
    assert main(["served-models", "forget"]) == EXIT_BAD_INPUT
