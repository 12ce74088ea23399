"""What a model name may be: it names a served model in jobs, routes and Redis key names."""

from __future__ import annotations

from contract.errors import InvalidJobError

MAX_MODEL_NAME_CHARS = 128
"""The longest model name: it becomes part of Redis key names."""


def validate_model_name(name: object) -> str:
    """``name`` if it can name a served model (1-128 visible characters, no spaces, ``{`` or ``}``);
    raise :class:`~contract.errors.InvalidJobError` otherwise."""
    if not isinstance(name, str):
        raise InvalidJobError(f"model must be a string naming a served model, got {type(name).__name__}")
    if not name:
        raise InvalidJobError("model is empty: name a served model (GET /v1/models lists them), or leave it out")
    if len(name) > MAX_MODEL_NAME_CHARS:
        raise InvalidJobError(f"model name has {len(name)} characters, over the limit of {MAX_MODEL_NAME_CHARS}")
    bad = sorted({c for c in name if c in "{}" or not c.isprintable() or c.isspace()})
    if bad:
        raise InvalidJobError(
            f"model name {name!r} contains {', '.join(repr(c) for c in bad)}: a model name has no spaces, "
            "control characters, '{' or '}'"
        )
    return name
