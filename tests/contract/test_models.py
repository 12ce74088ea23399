"""Model names and the routing rules for jobs that name no model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contract.errors import InvalidJobError
from contract.model_names import validate_model_name
from contract.models import ModelRoute, ModelRouter, served_names
from contract.schemas import Lane
from contract.settings import Settings


def test_a_model_name_may_be_a_hub_id_but_never_has_braces_or_spaces() -> None:
    assert validate_model_name("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    for bad in ("", "a b", "{x}", "tab\tname", "x" * 129):
        with pytest.raises(InvalidJobError):
            validate_model_name(bad)
    with pytest.raises(InvalidJobError, match="must be a string"):
        validate_model_name(7)


def test_the_first_matching_route_wins_and_the_default_takes_the_rest() -> None:
    router = ModelRouter(
        "gemma",
        [
            ModelRoute(source="zh*", model="hunyuan"),
            ModelRoute(target="zh*", model="hunyuan"),
            ModelRoute(lane=Lane.INTERACTIVE, model="small"),
        ],
    )
    assert router.route("zh-Hant", "en", Lane.BULK) == "hunyuan"
    assert router.route("de", "ZH", Lane.INTERACTIVE) == "hunyuan"  # codes match without regard to case
    assert router.route("de", "en", Lane.INTERACTIVE) == "small"
    assert router.route("de", "en", Lane.BULK) == "gemma"
    assert router.route("auto", "fr", Lane.BULK) == "gemma"
    assert router.configured == {"gemma", "hunyuan", "small"}


def test_routes_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_MODEL_ROUTES", '[{"source": "ja", "target": "en", "model": "ja-en"}]')
    monkeypatch.setenv("DRAGOMAN_DEFAULT_MODEL", "big")
    settings = Settings()
    assert settings.model_routes == [ModelRoute(source="ja", target="en", model="ja-en")]
    assert ModelRouter(settings.default_model, settings.model_routes).route("ja", "en", Lane.BULK) == "ja-en"


def test_a_bad_route_is_refused_when_the_settings_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_MODEL_ROUTES", '[{"source": "ja", "modle": "x"}]')
    with pytest.raises(ValidationError, match="modle"):
        Settings()
    monkeypatch.setenv("DRAGOMAN_MODEL_ROUTES", '[{"model": "has space"}]')
    with pytest.raises(ValidationError, match="no spaces"):
        Settings()
    monkeypatch.delenv("DRAGOMAN_MODEL_ROUTES")
    monkeypatch.setenv("DRAGOMAN_SERVED_MODEL_NAMES", '["ok", "{bad}"]')
    with pytest.raises(ValidationError, match=r"'\{'"):
        Settings()


def test_a_worker_serves_the_default_model_unless_named_and_drops_repeated_names() -> None:
    assert served_names([], "default") == ("default",)
    assert served_names(["hy", "hy-mt", "hy"], "default") == ("hy", "hy-mt")
