"""Several models in one deployment: model names, and the routing rules for jobs that name none.

A deployment serves one or more *models*, each under one or more names. A job may name its
model; one that does not is routed by the settings: the first rule of ``DRAGOMAN_MODEL_ROUTES``
that matches its language pair and lane, else ``DRAGOMAN_DEFAULT_MODEL``. Each model has its own
lanes (``broker.keys``); a worker serves the model of its first ``--served-model-name`` (the
default model when it gives none) and registers its other names as aliases of it.

A rule's ``source`` and ``target`` are shell-style patterns (``zh*``, ``*``, ``en``) matched,
without regard to case, against the job's language codes as normalized at submit (``auto`` for a
source to detect); ``lane`` restricts a rule to one lane. Example::

    DRAGOMAN_MODEL_ROUTES='[{"source": "zh*", "model": "hunyuan"}, {"target": "zh*", "model": "hunyuan"},
                            {"lane": "interactive", "model": "small"}]'
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contract.model_names import validate_model_name
from contract.schemas import Lane


class ModelRoute(BaseModel):
    """One routing rule: jobs naming no model whose pair and lane match go to ``model``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="the model the matching jobs go to")
    source: str = Field(default="*", description="pattern of the source language code (e.g. zh*, auto)")
    target: str = Field(default="*", description="pattern of the target language code")
    lane: Lane | None = Field(default=None, description="only jobs of this lane (interactive or bulk)")

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        return validate_model_name(value)

    def matches(self, source_lang: str, target_lang: str, lane: Lane) -> bool:
        """Whether a job of this pair in this lane follows the rule."""
        return (
            (self.lane is None or self.lane is lane)
            and fnmatch.fnmatchcase(source_lang.lower(), self.source.lower())
            and fnmatch.fnmatchcase(target_lang.lower(), self.target.lower())
        )


class ModelRouter:
    """Which model a job goes to: the one it names, else the first matching rule's, else the default."""

    def __init__(self, default_model: str, routes: Sequence[ModelRoute] = ()) -> None:
        self.default_model = validate_model_name(default_model)
        self.routes = tuple(routes)

    def route(self, source_lang: str, target_lang: str, lane: Lane) -> str:
        """The model for a job that names none."""
        for rule in self.routes:
            if rule.matches(source_lang, target_lang, lane):
                return rule.model
        return self.default_model

    @property
    def configured(self) -> frozenset[str]:
        """The models the settings name: the default and every rule's."""
        return frozenset([self.default_model, *(rule.model for rule in self.routes)])


def served_names(names: Iterable[str], default_model: str) -> tuple[str, ...]:
    """A worker's served names, validated, duplicates dropped: ``names``, or the default model's if none.

    The first is the model whose lanes the worker reads; the others are its aliases.
    """
    found: list[str] = []
    for name in names:
        if validate_model_name(name) not in found:
            found.append(name)
    return tuple(found) or (validate_model_name(default_model),)
