"""The ``--glossary`` option's value: a JSON object of source term -> target term, given inline or as ``@FILE``."""

from __future__ import annotations

import json

from contract.errors import InvalidJobError


def parse_glossary_option(raw: str | None) -> dict[str, str] | None:
    """``--glossary`` of ``dragoman submit`` and ``dragoman translate``: a JSON object, or ``@FILE`` holding one."""
    if raw is None:
        return None
    if raw.startswith("@"):
        try:
            with open(raw[1:], encoding="utf-8") as file:
                raw = file.read()
        except OSError as exc:
            raise InvalidJobError(f"--glossary {raw}: cannot read the file ({exc.strerror})") from None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidJobError(f'--glossary must be a JSON object such as \'{{"cat": "chat"}}\': {exc}') from None
    return value  # type: ignore[no-any-return]  # checked by the client (InvalidGlossaryError)
