"""Command-line flags that set a setting: one precedence rule, flag > environment > settings file > default.

A flag that mirrors a setting has the setting's name as its ``dest`` and no default of its own
(None: not given); its command lists it with :func:`mirror_settings`. :func:`overlay_flags`,
called once for every command before it runs, puts each flag the user gave in place of its
setting and validates the result as the environment's values are validated; a flag left out
leaves the environment's value (or the default). No command reads such a flag itself.
"""

from __future__ import annotations

import argparse

from contract.settings import Settings

SETTING_FLAGS = "setting_flags"
"""The parsed arguments' attribute naming the flags of a command that mirror settings."""


def mirror_settings(parser: argparse.ArgumentParser, *names: str) -> None:
    """Declare that ``parser``'s flags with these ``dest`` names set the settings of the same names."""
    unknown = [name for name in names if name not in Settings.model_fields]
    if unknown:
        raise ValueError(f"flags mirror settings that do not exist: {', '.join(unknown)}")
    parser.set_defaults(**{SETTING_FLAGS: names})


def overlay_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """``settings`` with every mirrored flag the user gave (not None) in its setting's place, validated
    (``pydantic.ValidationError``, a ``ValueError``: exit 2, for a value the setting refuses)."""
    names: tuple[str, ...] = getattr(args, SETTING_FLAGS, ())
    given = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    if not given:
        return settings
    return type(settings).model_validate({**settings.model_dump(), **given})
