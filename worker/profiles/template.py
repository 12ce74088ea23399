"""Profiles without code: a Jinja2 template with stop strings, sampling and the controls it handles.

Defined in a model folder's ``dragoman.json`` (``{"profile": {...}}``) or a file passed with
``dragoman worker --profile-file``. The template sees ``source_lang``/``target_lang`` (codes),
``source_language``/``target_language`` (English names), ``text``, ``glossary`` (a list of
``{source, target}`` for the terms found in the text), ``context`` and ``formality`` (``None`` when
the job has none). It renders in Jinja's sandbox with undefined names an error, and is rendered
once for a sample job when loaded, so a broken file stops the worker at start, not a job later.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contract.controls import Control, Formality
from contract.errors import ConfigurationError, UnrunnableJobError
from contract.schemas import JobSpec
from worker.engine import Tokenizer
from worker.profiles.base import (
    PieceUnit,
    PromptProfile,
    Sampling,
    chat_prompt,
    glossary_in_text,
    languages,
    newline_token_ids,
    template_refused,
)

_KEYS = {"name", "version", "template", "chat", "stop", "sampling", "supports", "piece_unit"}
_SAMPLE = JobSpec(
    job_id="00000000-0000-4000-8000-000000000000",
    text="The cat sleeps.",
    source_lang="en",
    target_lang="fr",
    created_at=0.0,
    glossary={"cat": "chat"},
    context="A story about pets.",
    formality=Formality.FORMAL,
)


class TemplateProfile(PromptProfile):
    """A profile defined by data: its Jinja2 template, stop strings, sampling and supported controls."""

    def __init__(self, tokenizer: Tokenizer, definition: Mapping[str, Any], origin: str) -> None:
        super().__init__(tokenizer)
        self.origin = origin
        unknown = set(definition) - _KEYS
        if unknown:
            raise self._error(f"unknown key(s) {sorted(unknown)}; a profile has {sorted(_KEYS)}")
        self.name = _string(definition.get("name", "template"), "name", self._error)
        digest = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:10]
        # Any change to the definition changes the version, so the translation memory never
        # serves what the old template produced.
        self.version = f"{definition.get('version', '1')}+{digest}"
        source = definition.get("template")
        if not isinstance(source, str) or not source.strip():
            raise self._error("'template' must be a non-empty string (a Jinja2 template)")
        self.chat = definition.get("chat", False)
        if not isinstance(self.chat, bool):
            raise self._error("'chat' must be true (render as the user message of the chat template) or false")
        if self.chat and not getattr(tokenizer, "chat_template", None):
            raise self._error("'chat' is true but the model's tokenizer has no chat template")
        self.stop_strings = tuple(_strings(definition.get("stop", []), "stop", self._error))
        self.sampling = _sampling(definition.get("sampling", {}), self._error)
        self.supports = frozenset(_controls(definition.get("supports", []), self._error))
        unit = definition.get("piece_unit", "text")
        if unit not in ("text", "line", "sentence"):
            raise self._error("'piece_unit' must be 'text', 'line' or 'sentence'")
        self.piece_unit: PieceUnit = unit
        self._template = _compile(source, self._error)
        try:
            self.build_prompt(_SAMPLE)
        except ConfigurationError:
            raise
        except Exception as exc:  # any template error, on a job that uses every variable
            cause = exc.__cause__ if isinstance(exc, UnrunnableJobError) and exc.__cause__ is not None else exc
            raise self._error(f"the template fails on a sample job: {type(cause).__name__}: {cause}") from None

    def _error(self, problem: str) -> ConfigurationError:
        return ConfigurationError(f"prompt profile in {self.origin}: {problem}")

    def variables(self, spec: JobSpec) -> dict[str, Any]:
        """What the template sees for ``spec`` (unsupported controls are ``None``/empty)."""
        source, target = languages(spec)
        return {
            "source_lang": spec.source_lang,
            "target_lang": spec.target_lang,
            "source_language": source,
            "target_language": target,
            "text": spec.text,
            "glossary": [{"source": s, "target": t} for s, t in glossary_in_text(spec)]
            if Control.GLOSSARY in self.supports
            else [],
            "context": spec.context if Control.CONTEXT in self.supports else None,
            "formality": spec.formality.value
            if spec.formality is not None and Control.FORMALITY in self.supports
            else None,
        }

    def build_prompt(self, spec: JobSpec) -> str:
        """The template rendered for ``spec``; with ``chat``, sent through the chat template as the user message."""
        try:
            rendered = str(self._template.render(**self.variables(spec)))
        except Exception as exc:
            from jinja2 import TemplateError

            if not isinstance(exc, TemplateError):
                raise
            raise template_refused(exc) from exc
        if self.chat:
            return chat_prompt(self.tokenizer, [{"role": "user", "content": rendered}])
        return rendered

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The prompt's ids; the BOS token added only when the chat template does not carry it."""
        if self.chat:
            return self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)
        return super().prompt_token_ids(spec)

    def stop_token_ids(self) -> Sequence[int]:
        """Line-break tokens when a stop string is a line break (cheaper than a string match)."""
        return newline_token_ids(self.tokenizer) if "\n" in self.stop_strings else ()


def load_definition(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a ``ConfigurationError`` naming the file if it is not one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read the prompt profile file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigurationError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path} must hold a JSON object")
    return data


def _compile(source: str, error: Any) -> Any:
    from jinja2 import StrictUndefined, TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)
    try:
        return environment.from_string(source)
    except TemplateSyntaxError as exc:
        raise error(f"the template is not valid Jinja2 (line {exc.lineno}: {exc.message})") from None


def _string(value: object, key: str, error: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise error(f"'{key}' must be a non-empty string")
    return value


def _strings(value: object, key: str, error: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise error(f"'{key}' must be a list of non-empty strings")
    return list(value)


def _controls(value: object, error: Any) -> list[Control]:
    names = _strings(value, "supports", error)
    known = {c.value: c for c in Control}
    wrong = [n for n in names if n not in known]
    if wrong:
        raise error(f"'supports' names unknown control(s) {wrong}; they are {sorted(known)}")
    return [known[n] for n in names]


def _sampling(value: object, error: Any) -> Sampling:
    if not isinstance(value, dict):
        raise error("'sampling' must be an object (temperature, top_p, top_k, repetition_penalty)")
    unknown = set(value) - {"temperature", "top_p", "top_k", "repetition_penalty"}
    if unknown:
        raise error(f"'sampling' has unknown key(s) {sorted(unknown)}")
    try:
        sampling = Sampling(**value)
    except TypeError as exc:
        raise error(f"'sampling' is wrong: {exc}") from None
    numbers = (sampling.temperature, sampling.top_p, sampling.repetition_penalty)
    if any(isinstance(n, bool) or not isinstance(n, int | float) for n in numbers) or not isinstance(
        sampling.top_k, int
    ):
        raise error("'sampling' values must be numbers (top_k an integer)")
    if (
        sampling.temperature < 0
        or not 0 < sampling.top_p <= 1
        or sampling.top_k < 0
        or sampling.repetition_penalty <= 0
    ):
        raise error("'sampling' out of range: temperature >= 0, 0 < top_p <= 1, top_k >= 0, repetition_penalty > 0")
    return sampling
