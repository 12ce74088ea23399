"""Backoff: the base delay grows to its cap, draws stay inside their jitter band, reset starts over."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from contract.backoff import Backoff


def draws(*values: float) -> Callable[[], float]:
    """A random source that returns ``values`` in order."""
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def test_the_base_delay_grows_by_the_factor_up_to_the_maximum() -> None:
    backoff = Backoff(0.2, 1.0, random_source=lambda: 1.0)  # the top of the band: the base itself
    assert [round(backoff.next_delay(), 9) for _ in range(6)] == [0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_a_custom_factor() -> None:
    backoff = Backoff(1.0, 100.0, factor=3.0, random_source=lambda: 1.0)
    assert [backoff.next_delay() for _ in range(5)] == [1.0, 3.0, 9.0, 27.0, 81.0]
    assert backoff.base == 100.0


def test_equal_jitter_draws_from_the_upper_half_of_the_base() -> None:
    backoff = Backoff(0.4, 10.0, random_source=draws(0.0, 0.5, 0.999))
    assert backoff.next_delay() == pytest.approx(0.2)  # base 0.4, lowest draw: half of it
    assert backoff.next_delay() == pytest.approx(0.6)  # base 0.8, middle draw
    assert backoff.next_delay() == pytest.approx(0.8 + 0.8 * 0.999)  # base 1.6, almost all of it


def test_full_jitter_draws_from_zero_to_the_base() -> None:
    backoff = Backoff(0.4, 10.0, jitter="full", random_source=draws(0.0, 0.5, 0.999))
    assert backoff.next_delay() == 0.0
    assert backoff.next_delay() == pytest.approx(0.4)
    assert backoff.next_delay() == pytest.approx(1.6 * 0.999)


@pytest.mark.parametrize("jitter", ["equal", "full"])
def test_real_random_draws_stay_in_their_band(jitter: str) -> None:
    backoff = Backoff(0.1, 5.0, jitter=jitter)  # type: ignore[arg-type]
    low = 0.5 if jitter == "equal" else 0.0
    for _ in range(1_000):
        base = backoff.base
        assert low * base <= backoff.next_delay() <= base <= 5.0
    assert backoff.base == 5.0


def test_reset_starts_again_from_the_initial_delay() -> None:
    backoff = Backoff(0.2, 10.0, random_source=lambda: 1.0)
    for _ in range(4):
        backoff.next_delay()
    assert backoff.base == pytest.approx(3.2)
    backoff.reset()
    assert backoff.base == 0.2
    assert backoff.next_delay() == pytest.approx(0.2)


def test_a_limit_caps_the_delay_and_the_base_grows_all_the_same() -> None:
    backoff = Backoff(1.0, 8.0, random_source=lambda: 1.0)
    assert backoff.next_delay() == 1.0
    assert backoff.next_delay(limit=0.3) == 0.3
    assert backoff.next_delay(limit=-1.0) == 0.0  # a deadline already passed: no wait at all
    assert backoff.next_delay(limit=100.0) == 8.0  # a limit past the delay changes nothing
    assert backoff.base == 8.0  # every draw, limited or not, moved the backoff on


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"initial": 0.0, "maximum": 1.0}, "initial"),
        ({"initial": 2.0, "maximum": 1.0}, "maximum"),
        ({"initial": 1.0, "maximum": 2.0, "factor": 0.5}, "factor"),
        ({"initial": 1.0, "maximum": 2.0, "jitter": "none"}, "jitter"),
    ],
)
def test_nonsense_settings_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**arguments)  # type: ignore[arg-type]


def test_retry_intervals_grow_to_the_maximum_and_stop() -> None:
    from contract.backoff import retry_intervals

    assert retry_intervals(1, 60) == [1, 2, 4, 8, 16, 32, 60]
    assert retry_intervals(5, 5) == [5]
