"""Quality flags: what a weight-free check found wrong with a finished translation.

Every translation job the worker finishes is checked (the checks themselves run in the worker);
the row's ``quality_flags`` holds the outcome as ``{flag: evidence}``: an empty mapping for a
translation that passed every check, ``None`` for a row that was never checked (a failed or
cancelled job, a raw-prompt job of the Batch API, a row from before the checks existed). The
evidence is a short sentence a user can act on ("source number 42 missing").
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from contract.errors import ConfigurationError, InvalidJobError


class QualityFlag(StrEnum):
    """One kind of problem a finished translation can have; the value is the key stored on the row."""

    WRONG_LANGUAGE = "wrong_language"
    """The output's detected language is not the target language."""
    UNTRANSLATED = "untranslated"
    """The output is (nearly) the source text, between two different languages."""
    LENGTH_RATIO = "length_ratio"
    """The output's length is outside the band expected for the language pair."""
    NUMBERS = "numbers"
    """Digits or amounts of the source are missing from the output, or changed."""
    PLACEHOLDERS = "placeholders"
    """Placeholders (printf, Python, ICU, platform forms) missing from the output, or invented."""
    TAGS = "tags"
    """Markup or placeholder tags missing from the output, or invented."""
    GLOSSARY = "glossary"
    """Glossary terms in the source whose target term the output lacks."""
    REPETITION = "repetition"
    """The output ends in a span repeated over and over (a generation loop)."""


QualityFlags = dict[str, str]
"""A row's flags: flag value -> evidence. Empty: checked and clean."""

FLAG_NAMES: tuple[str, ...] = tuple(flag.value for flag in QualityFlag)


class UnknownQualityFlagError(InvalidJobError):
    """A filter or setting named a flag that does not exist; the message lists the ones that do."""


def parse_flags(names: Iterable[str], *, setting: str | None = None) -> frozenset[QualityFlag]:
    """The flags named in ``names`` (blank names skipped); an unknown one raises with the list of valid ones.

    ``setting`` names the environment variable the names came from, so its error is a
    :class:`~contract.errors.ConfigurationError` that says which variable to fix.
    """
    flags: set[QualityFlag] = set()
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        try:
            flags.add(QualityFlag(name))
        except ValueError:
            message = f"unknown quality flag {name!r}; the flags are {', '.join(FLAG_NAMES)}"
            if setting is not None:
                raise ConfigurationError(f"{setting}: {message}") from None
            raise UnknownQualityFlagError(message) from None
    return frozenset(flags)
