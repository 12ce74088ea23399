"""Raw-prompt jobs: a chat or completion request run on the model as given, with no prompt profile.

The OpenAI Batch API's ``/v1/chat/completions`` and ``/v1/completions`` lines become such jobs.
A job carries one in its wire payload's ``generation`` object; its ``text`` is the prompt (or
the messages as JSON), stored as the row's source text, and its languages are
:data:`RAW_LANGUAGE`. The worker builds the prompt from the messages with the model's chat
template (or takes the prompt as it is) and maps the sampling fields to the engine's.
"""

from __future__ import annotations

import json
import math
from typing import Any

from contract.errors import InvalidJobError, shown

RAW_LANGUAGE = "und"
"""The source and target language recorded for a raw-prompt job (BCP-47's "undetermined")."""

KINDS = ("chat", "completion")
ROLES = ("system", "developer", "user", "assistant")
MAX_STOP_SEQUENCES = 4


class InvalidGenerationError(InvalidJobError):
    """A raw-prompt request that cannot run; the message names the field."""


def _number(value: object, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidGenerationError(f"{name} must be a number, got {shown(value)}")
    if not low <= value <= high:
        raise InvalidGenerationError(f"{name} must be between {low:g} and {high:g}, got {value}")
    return float(value)


def _integer(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidGenerationError(f"{name} must be an integer from {low} to {high}, got {shown(value)}")
    return value


def validate_generation(value: object) -> dict[str, Any]:
    """The request as the worker reads it (only the known fields, checked); raises :class:`InvalidGenerationError`.

    ``{"kind": "chat", "messages": [{"role", "content"}, ...]}`` or ``{"kind": "completion",
    "prompt": "..."}``, with optional ``max_tokens``, ``temperature`` (0 to 2), ``top_p`` (0 to
    1), ``seed`` and ``stop`` (a string or up to four).
    """
    if not isinstance(value, dict):
        raise InvalidGenerationError(f"generation must be an object, got {shown(value)}")
    kind = value.get("kind")
    checked: dict[str, Any] = {"kind": kind}
    if kind == "chat":
        messages = value.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidGenerationError("messages must be a non-empty list of {role, content} objects")
        kept = []
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                raise InvalidGenerationError(f"messages[{index}].role must be one of {', '.join(ROLES)}")
            content = message.get("content")
            if not isinstance(content, str):
                raise InvalidGenerationError(f"messages[{index}].content must be a string (text parts only)")
            kept.append({"role": message["role"], "content": content})
        checked["messages"] = kept
    elif kind == "completion":
        prompt = value.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise InvalidGenerationError("prompt must be a non-empty string")
        checked["prompt"] = prompt
    else:
        raise InvalidGenerationError(f"generation kind must be one of {', '.join(KINDS)}, got {shown(kind)}")
    if value.get("max_tokens") is not None:
        checked["max_tokens"] = _integer(value["max_tokens"], "max_tokens", 1, 2**31 - 1)
    if value.get("temperature") is not None:
        checked["temperature"] = _number(value["temperature"], "temperature", 0, 2)
    if value.get("top_p") is not None:
        checked["top_p"] = _number(value["top_p"], "top_p", 0, 1)
    if value.get("seed") is not None:
        checked["seed"] = _integer(value["seed"], "seed", -(2**63), 2**63 - 1)
    stop = value.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if (
            not isinstance(stops, list)
            or len(stops) > MAX_STOP_SEQUENCES
            or not all(isinstance(s, str) and s for s in stops)
        ):
            raise InvalidGenerationError(f"stop must be a string or a list of up to {MAX_STOP_SEQUENCES} strings")
        checked["stop"] = stops
    return checked


def generation_text(generation: dict[str, Any]) -> str:
    """What a raw-prompt job records as its text: the prompt, or the messages as JSON."""
    if generation["kind"] == "completion":
        return str(generation["prompt"])
    return json.dumps(generation["messages"], ensure_ascii=False)


def cut_at_stop(text: str, stops: list[str] | None) -> tuple[str, bool]:
    """``text`` up to the first of the stop sequences, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stops or ()) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
