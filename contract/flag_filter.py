"""The "flagged" filter of a run's results: every line, the lines with any quality flag, or with chosen ones.

One reading for every door that lists a run's jobs: ``dragoman run results --flagged[=NAMES]``,
``GET /v1/runs/{id}/results?flagged=...`` and the client's ``iter_run_results(flagged=...)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from contract.quality import QualityFlag, UnknownQualityFlagError, parse_flags

FlagFilter = frozenset[QualityFlag] | None
"""``None``: no filter; an empty set: jobs with any flag; else jobs with at least one of these flags."""

ANY_FLAG: frozenset[QualityFlag] = frozenset()
"""The filter that keeps every flagged job, whatever its flags."""

_YES = frozenset({"true", "1", "yes", "on", "any"})
_NO = frozenset({"false", "0", "no", "off", ""})


def parse_flag_filter(value: str | bool | Iterable[str] | None) -> FlagFilter:
    """The filter a user asked for: ``True``/``"true"``/``"any"`` keeps every flagged job, ``False``/
    ``"false"``/``None`` filters nothing, and flag names (a comma-separated string or a list) keep the jobs
    with at least one of them.

    A name that is no flag raises :class:`~contract.quality.UnknownQualityFlagError`, listing the flags.
    """
    if value is None or value is False:
        return None
    if value is True:
        return ANY_FLAG
    names: list[str] = value.split(",") if isinstance(value, str) else list(value)
    if len(names) == 1 and names[0].strip().lower() in _YES:
        return ANY_FLAG
    if len(names) == 1 and names[0].strip().lower() in _NO:
        return None
    chosen = parse_flags(names)
    if not chosen:
        raise UnknownQualityFlagError(
            f"flagged names no flag; give true, false or flag names ({', '.join(flag.value for flag in QualityFlag)})"
        )
    return chosen


def filter_names(flag_filter: FlagFilter) -> list[str] | None:
    """The flag names a storage query matches (sorted), ``[]`` for any flag, ``None`` for no filter."""
    return None if flag_filter is None else sorted(flag.value for flag in flag_filter)
